#!/usr/bin/env bash
# One command for the serving comparison: Rill vs llama.cpp's llama-server on
# this machine, same model, same threads, same workload, one run.
#   bench/serve_bench.sh                   # concurrency 1,4,16,64 + the long-context case
#   bench/serve_bench.sh --concurrency 1,4 --num-requests 16
# See bench/serve_bench.py --help for every flag. Results: bench/out/serve/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${RILL_VENV:-$ROOT/.venv}/bin/python3"
[[ -x "$PY" ]] || PY=python3
bazel build //cli:rill //bench/serve_bench:rill-bench-serve //engine/service:rill-engine \
  //frontend:rill-frontend //worker:rill-worker >&2
bash bench/build_llama_cpp.sh >&2
exec "$PY" bench/serve_bench.py "$@"
