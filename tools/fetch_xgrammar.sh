#!/usr/bin/env bash
# Fetches xgrammar's pinned PyPI sdist (the C++ grammar engine behind structured
# outputs) and extracts it to third_party/downloads/xgrammar (git-ignored and
# .bazelignore'd). WORKSPACE maps that folder to @xgrammar with
# third_party/xgrammar.BUILD, which compiles cpp/ + include/ only.
# Idempotent: a stamp holding the SHA-256 skips the work on reruns.
#   tools/fetch_xgrammar.sh [python-with-pip]
set -euo pipefail

XGRAMMAR_VERSION="0.2.8"
XGRAMMAR_URL="https://files.pythonhosted.org/packages/03/0f/29f521535729be740779c2c98b630ef6607cf28be9b669895dd2b821ff63/xgrammar-${XGRAMMAR_VERSION}.tar.gz"
XGRAMMAR_SHA256="8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/third_party/downloads/xgrammar"
PY="${1:-python3}"

log() { echo "[fetch_xgrammar] $*" >&2; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

stamp="$DEST/.rill-sha256"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$XGRAMMAR_SHA256" ]; then
  log "xgrammar $XGRAMMAR_VERSION: present"; exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
archive="$tmp/xgrammar-${XGRAMMAR_VERSION}.tar.gz"
log "downloading xgrammar $XGRAMMAR_VERSION sdist"
if command -v curl >/dev/null; then
  curl -fsSL -o "$archive" "$XGRAMMAR_URL"
else
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary xgrammar \
    "xgrammar==$XGRAMMAR_VERSION" -d "$tmp"
fi
got="$(sha_of "$archive")"
if [ "$got" != "$XGRAMMAR_SHA256" ]; then
  log "SHA-256 mismatch: got $got, want $XGRAMMAR_SHA256"; exit 1
fi
rm -rf "$DEST"
mkdir -p "$DEST"
tar xzf "$archive" -C "$DEST" --strip-components=1
echo "$XGRAMMAR_SHA256" > "$stamp"
log "xgrammar $XGRAMMAR_VERSION: extracted to $DEST"
