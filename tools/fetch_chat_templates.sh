#!/usr/bin/env bash
# Fetches the real chat templates that //tokenizer:chat_template_test renders
# against jinja2: llama.cpp's collection of published HF templates
# (vendor/llama.cpp/models/templates/*.jinja) and llama-cpp-python's built-in
# ones (llama_cpp/llama_chat_format.py: Mistral v1, Mixtral), both from the
# pinned llama-cpp-python sdist on PyPI. Extracted to
# third_party/downloads/chat_templates (git-ignored; WORKSPACE maps it to
# @chat_templates). Reuses bench/.cache's copy of the same sdist when present.
# Idempotent: a stamp holding the SHA-256 skips the work on reruns.
#   tools/fetch_chat_templates.sh [python-with-pip]
set -euo pipefail

VERSION="0.3.36"
SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/third_party/downloads/chat_templates"
PY="${1:-python3}"

log() { echo "[fetch_chat_templates] $*" >&2; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

stamp="$DEST/.rill-sha256"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$SHA256" ]; then
  log "chat templates (llama-cpp-python $VERSION): present"; exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
archive="$ROOT/bench/.cache/sdist/llama_cpp_python-${VERSION}.tar.gz"
if [ ! -f "$archive" ] || [ "$(sha_of "$archive")" != "$SHA256" ]; then
  log "downloading llama-cpp-python $VERSION sdist"
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "llama-cpp-python==$VERSION" -d "$tmp"
  archive="$(ls "$tmp"/llama[_-]cpp[_-]python-"$VERSION".tar.gz | head -1)"
fi
got="$(sha_of "$archive")"
if [ "$got" != "$SHA256" ]; then
  log "SHA-256 mismatch: got $got, want $SHA256"; exit 1
fi
mkdir -p "$tmp/x"
tar xzf "$archive" -C "$tmp/x" --strip-components=1 --wildcards \
  '*/vendor/llama.cpp/models/templates/*.jinja' '*/llama_cpp/llama_chat_format.py' '*/LICENSE.md'
rm -rf "$DEST"
mkdir -p "$DEST"
mv "$tmp/x/vendor/llama.cpp/models/templates" "$DEST/templates"
mv "$tmp/x/llama_cpp/llama_chat_format.py" "$DEST/"
cp "$tmp/x/LICENSE.md" "$DEST/" 2>/dev/null || true
echo "$SHA256" > "$stamp"
log "chat templates: extracted to $DEST"
