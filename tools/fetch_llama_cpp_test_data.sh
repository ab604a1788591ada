#!/usr/bin/env bash
# Fetches the test data that Rill takes from the pinned llama-cpp-python sdist
# on PyPI (the same sdist bench/build_llama_cpp.sh builds llama.cpp from),
# downloading it once for both:
#   - llama.cpp's vocab-only GGUFs with golden tokenizations
#     (vendor/llama.cpp/models/ggml-vocab-*.gguf{,.inp,.out}) into
#     $RILL_MODEL_DIR/ggml-vocab (default ~/.cache/rill/models), read by
#     //engine:tokenizer_vocab_parity_test;
#   - published chat templates (vendor/llama.cpp/models/templates/*.jinja and
#     llama_cpp/llama_chat_format.py's Mistral v1 / Mixtral) into
#     third_party/downloads/chat_templates (git-ignored; WORKSPACE maps it to
#     @chat_templates), rendered by //tokenizer:chat_template_test.
# Only those files are extracted; nothing is committed. The sdist is kept in
# bench/.cache/sdist (git-ignored) and checked by SHA-256 before every use.
# Idempotent: a stamp holding the SHA-256 in each destination skips its work.
#   RILL_MODEL_DIR=/models tools/fetch_llama_cpp_test_data.sh [python-with-pip]
set -euo pipefail

VERSION="0.3.36"
SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL_DIR="${RILL_MODEL_DIR:-$HOME/.cache/rill/models}"
VOCAB_DEST="$MODEL_DIR/ggml-vocab"
TEMPLATE_DEST="$ROOT/third_party/downloads/chat_templates"
PY="${1:-python3}"

log() { echo "[fetch_llama_cpp_test_data] $*" >&2; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }
present() { [ -f "$1/.rill-sha256" ] && [ "$(cat "$1/.rill-sha256")" = "$SHA256" ]; }

if present "$VOCAB_DEST" && present "$TEMPLATE_DEST"; then
  log "llama-cpp-python $VERSION vocabs and chat templates: present"; exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# The sdist, downloaded once into bench/.cache/sdist (where the llama.cpp
# build looks too) and checked by SHA-256.
sdist_dir="$ROOT/bench/.cache/sdist"
archive="$sdist_dir/llama_cpp_python-${VERSION}.tar.gz"
if [ ! -f "$archive" ] || [ "$(sha_of "$archive")" != "$SHA256" ]; then
  log "downloading llama-cpp-python==$VERSION sdist from PyPI"
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "llama-cpp-python==$VERSION" -d "$tmp/dl"
  mkdir -p "$sdist_dir"
  mv "$(ls "$tmp"/dl/llama[_-]cpp[_-]python-"$VERSION".tar.gz | head -1)" "$archive"
fi
got="$(sha_of "$archive")"
if [ "$got" != "$SHA256" ]; then
  log "SHA-256 mismatch for $archive: got $got, want $SHA256"; exit 1
fi

if ! present "$VOCAB_DEST"; then
  mkdir -p "$tmp/vocab"
  tar xzf "$archive" -C "$tmp/vocab" --strip-components=4 --wildcards \
    "*/vendor/llama.cpp/models/ggml-vocab-*"
  n="$(ls "$tmp/vocab"/ggml-vocab-*.gguf | wc -l)"
  if [ "$n" -lt 10 ]; then
    log "the sdist held only $n ggml-vocab-*.gguf files"; exit 1
  fi
  rm -rf "$VOCAB_DEST"
  mkdir -p "$MODEL_DIR"
  mv "$tmp/vocab" "$VOCAB_DEST"
  echo "$SHA256" > "$VOCAB_DEST/.rill-sha256"
  log "vocabs: $n GGUFs extracted to $VOCAB_DEST"
fi

if ! present "$TEMPLATE_DEST"; then
  mkdir -p "$tmp/t"
  tar xzf "$archive" -C "$tmp/t" --strip-components=1 --wildcards \
    '*/vendor/llama.cpp/models/templates/*.jinja' '*/llama_cpp/llama_chat_format.py' \
    '*/LICENSE.md'
  rm -rf "$TEMPLATE_DEST"
  mkdir -p "$TEMPLATE_DEST"
  mv "$tmp/t/vendor/llama.cpp/models/templates" "$TEMPLATE_DEST/templates"
  mv "$tmp/t/llama_cpp/llama_chat_format.py" "$TEMPLATE_DEST/"
  cp "$tmp/t/LICENSE.md" "$TEMPLATE_DEST/" 2>/dev/null || true
  echo "$SHA256" > "$TEMPLATE_DEST/.rill-sha256"
  log "chat templates: extracted to $TEMPLATE_DEST"
fi
