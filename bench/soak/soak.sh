#!/usr/bin/env bash
# Builds what the soak needs and runs it (default 600 s); see soak.py --help.
#   bench/soak/soak.sh                 # 10 minutes
#   bench/soak/soak.sh --duration 120  # a quick check
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
PY="${RILL_VENV:-$ROOT/.venv}/bin/python3"
[[ -x "$PY" ]] || PY=python3
bazel build //cli:rill //engine/service:rill-engine //frontend:rill-frontend >&2
exec "$PY" bench/soak/soak.py "$@"
