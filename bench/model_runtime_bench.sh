#!/usr/bin/env bash
# One-command model-runtime benchmark: Rill vs llama.cpp.
#   bench/model_runtime_bench.sh [--threads=N] [--skip-rill] [...]
# Builds the llama.cpp peer first if needed (idempotent, PyPI sdist), then runs
# bench/model_runtime_bench.py with the project venv's python (RILL_VENV,
# default <repo>/.venv; falls back to python3: the script needs only stdlib).
# All flags are passed through; see --help. For an AVX2-only comparison on an
# AVX-512 machine: LLAMA_CPP_ISA=avx2 RILL_CPU_NO_AVX512=1 bench/model_runtime_bench.sh
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "${BENCH_DIR}/.." && pwd)"
VENV="${RILL_VENV:-${REPO_ROOT}/.venv}"
if [[ -x "${VENV}/bin/python" ]]; then
  PY="${VENV}/bin/python"
else
  echo "note: no venv python at ${VENV}/bin/python; using python3" >&2
  PY="$(command -v python3)"
fi
if [[ " $* " != *" --skip-llama "* && " $* " != *" --help "* && " $* " != *" -h "* ]]; then
  "${BENCH_DIR}/build_llama_cpp.sh"
fi
# LLAMA_CPP_ISA=avx2 (see build_llama_cpp.sh) measures the AVX2-only peer;
# run it with RILL_CPU_NO_AVX512=1 so Rill is held to AVX2 as well.
extra=()
if [[ "${LLAMA_CPP_ISA:-native}" == "avx2" && " $* " != *" --llama-bin-dir"* ]]; then
  extra=(--llama-bin-dir "${BENCH_DIR}/.cache/llama.cpp-build-avx2/bin")
fi
exec "${PY}" "${BENCH_DIR}/model_runtime_bench.py" "${extra[@]}" "$@"
