#!/usr/bin/env bash
# Fetches the gateway protocol definitions (vLLM's engine protocol as the
# Shepherd Model Gateway speaks it) from the pinned PyPI wheel smg-grpc-proto,
# checks the wheel's SHA-256 and extracts its .proto files into proto/smg/,
# where Bazel compiles them (//proto/smg). The files are git-ignored: they are
# a dependency's sources, never committed.
# Idempotent: a stamp holding the wheel's hash skips the download on reruns.
#   tools/fetch_smg_protos.sh [python-with-pip]
set -euo pipefail

PROTO_WHEEL="smg-grpc-proto==0.4.28"
PROTO_WHEEL_FILE="smg_grpc_proto-0.4.28-py3-none-any.whl"
PROTO_WHEEL_SHA256="970dec0a8c0e78b42758c7690cc7b8bbf0416f680fdad448a4f5c9b8c3e68afb"
PROTO_FILES=(common.proto vllm_engine.proto)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$ROOT/proto/smg"
PY="${1:-python3}"

log() { echo "[fetch_smg_protos] $*" >&2; }

stamp="$DEST/.wheel-sha256"
present=1
for f in "${PROTO_FILES[@]}"; do [ -f "$DEST/$f" ] || present=0; done
if [ "$present" = 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$PROTO_WHEEL_SHA256" ]; then
  log "protos in $DEST: present"; exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
log "downloading $PROTO_WHEEL from PyPI"
"$PY" -m pip download -q --disable-pip-version-check --no-deps "$PROTO_WHEEL" -d "$tmp"
got="$(sha256sum "$tmp/$PROTO_WHEEL_FILE" | cut -d' ' -f1)"
if [ "$got" != "$PROTO_WHEEL_SHA256" ]; then
  log "SHA-256 mismatch for $PROTO_WHEEL_FILE: got $got, want $PROTO_WHEEL_SHA256"; exit 1
fi
"$PY" - "$tmp/$PROTO_WHEEL_FILE" "$DEST" "${PROTO_FILES[@]}" <<'PY'
import sys, zipfile
wheel, dest, *names = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        with z.open("smg_grpc_proto/proto/" + name) as src, open(f"{dest}/{name}", "wb") as dst:
            dst.write(src.read())
PY
# Debian's protoc 3.21 generates a C++ accessor `descriptor()` for a field named
# `descriptor`, which clashes with the message's static descriptor(); the
# field is renamed in the extracted copy (names are not on the wire: number 2
# stays, so the messages are unchanged for every peer).
sed -i 's/^  bytes descriptor = 2;/  bytes descriptor_bytes = 2;  \/\/ Renamed by tools\/fetch_smg_protos.sh./' "$DEST/common.proto"
grep -q "bytes descriptor_bytes = 2;" "$DEST/common.proto" || { log "common.proto: the field rename did not apply"; exit 1; }
echo "$PROTO_WHEEL_SHA256" > "$stamp"
log "protos in $DEST: extracted from $PROTO_WHEEL_FILE (verified)"
