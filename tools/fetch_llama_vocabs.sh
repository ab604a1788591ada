#!/usr/bin/env bash
# Fetches llama.cpp's vocab-only GGUFs with their golden tokenizations
# (models/ggml-vocab-*.gguf{,.inp,.out}) from the pinned llama-cpp-python sdist
# on PyPI (the one bench/build_llama_cpp.sh builds), into
# $RILL_MODEL_DIR/ggml-vocab (default ~/.cache/rill/models). Only those files
# are extracted; nothing is committed. engine:tokenizer_vocab_parity_test reads
# them. Reuses bench/.cache/sdist's copy of the sdist when its SHA-256 matches.
# Idempotent: a stamp holding the sdist's SHA-256 skips the work on reruns.
#   RILL_MODEL_DIR=/models tools/fetch_llama_vocabs.sh [python-with-pip]
set -euo pipefail

SDIST_VERSION="0.3.36"
SDIST_FILE="llama_cpp_python-${SDIST_VERSION}.tar.gz"
SDIST_SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL_DIR="${RILL_MODEL_DIR:-$HOME/.cache/rill/models}"
DEST="$MODEL_DIR/ggml-vocab"
PY="${1:-python3}"

log() { echo "[fetch_llama_vocabs] $*" >&2; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

stamp="$DEST/.rill-sha256"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$SDIST_SHA256" ]; then
  log "vocabs $DEST: present"; exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
archive="$ROOT/bench/.cache/sdist/$SDIST_FILE"
if [ ! -f "$archive" ] || [ "$(sha_of "$archive")" != "$SDIST_SHA256" ]; then
  log "downloading llama-cpp-python==$SDIST_VERSION sdist from PyPI"
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "llama-cpp-python==$SDIST_VERSION" -d "$tmp"
  archive="$(ls "$tmp"/llama[_-]cpp[_-]python-"$SDIST_VERSION".tar.gz)"
fi
got="$(sha_of "$archive")"
if [ "$got" != "$SDIST_SHA256" ]; then
  log "SHA-256 mismatch: got $got, want $SDIST_SHA256"; exit 1
fi
mkdir -p "$tmp/x"
tar xzf "$archive" -C "$tmp/x" --strip-components=4 --wildcards \
  "*/vendor/llama.cpp/models/ggml-vocab-*"
n="$(ls "$tmp/x"/ggml-vocab-*.gguf | wc -l)"
if [ "$n" -lt 10 ]; then
  log "the sdist held only $n ggml-vocab-*.gguf files"; exit 1
fi
rm -rf "$DEST"
mkdir -p "$MODEL_DIR"
mv "$tmp/x" "$DEST"
echo "$SDIST_SHA256" > "$stamp"
log "vocabs $DEST: $n GGUFs extracted"
