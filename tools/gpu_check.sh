#!/bin/bash
# One-shot GPU check for a fresh CUDA box (CUDA toolkit, cmake, ninja; no
# Bazel, no network, no model file): builds kernels/cuda and its checker with
# CMake + Ninja, runs every kernel against its CPU reference on fresh random
# inputs, then the decode micro-benchmark; then, when build/cuda_model_check
# (tools/cuda_model_bundle.sh) came along, the CUDA Llama on the real model
# against the CPU Llama, its tensor-parallel ranks over NCCL (one rank in a
# world of one bitwise against no TP; two ranks when the box has two GPUs)
# and the speed table, the engine on cuda against the CPU engine, and the
# engine with one CUDA rank in a rill-worker process
# (--distributed_executor_backend=mp, NCCL) against the in-process CUDA
# engine's greedy tokens. Exit status: the first failing
# checker's (0 = all passed or skipped).
#
#   tools/gpu_check.sh [--dry-run] [checker flags, e.g. --seed=N --no-bench]
#
# --dry-run prints what would run and skips. Without a GPU the build still
# runs (it proves everything compiles) and the checker prints
# "skipped: no CUDA device".
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${RILL_GPU_CHECK_BUILD_DIR:-$root/build/gpu_check}
dry_run=0
args=()
for a in "$@"; do
  if [[ $a == --dry-run ]]; then dry_run=1; else args+=("$a"); fi
done

cuda_home=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}
nvcc=$(command -v nvcc || true)
[[ -z $nvcc && -x $cuda_home/bin/nvcc ]] && nvcc=$cuda_home/bin/nvcc

configure=(cmake -S "$root/kernels/cuda" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
           -DCMAKE_CUDA_ARCHITECTURES=${RILL_CUDA_ARCHS:-90})
[[ -n $nvcc ]] && configure+=("-DCMAKE_CUDA_COMPILER=$nvcc")

if [[ $dry_run -eq 1 ]]; then
  echo "would run: ${configure[*]}"
  echo "would run: cmake --build $build"
  echo "would run: $build/cuda_kernel_check ${args[*]:-}"
  echo "skipped: dry run"
  exit 0
fi
if [[ -z $nvcc ]]; then
  echo "skipped: no CUDA toolkit (nvcc not on PATH or in $cuda_home/bin)"
  exit 0
fi
for tool in cmake ninja; do
  if ! command -v "$tool" >/dev/null; then
    echo "gpu_check: $tool is required" >&2
    exit 2
  fi
done

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
if ! { "${configure[@]}" && cmake --build "$build" -j "$(nproc)"; } >"$log" 2>&1; then
  tail -n 60 "$log"
  echo "gpu_check: build failed" >&2
  exit 1
fi
echo "gpu_check: built in $((SECONDS - start)) s ($build)"

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no GPU visible to nvidia-smi; the checker will skip"
fi
# The checkers skip by themselves when the runtime sees no device.
rc=0
timeout "${RILL_GPU_CHECK_TIMEOUT_S:-420}" "$build/cuda_kernel_check" ${args[@]+"${args[@]}"} || rc=$?
# Then the real model, when its bundle came along (tools/cuda_model_bundle.sh
# here; carry build/cuda_model_check): CUDA Llama vs the CPU Llama's logits,
# tensor parallelism over NCCL (cuda_model_check's "tp ..." lines), the
# decode/prefill table against the issue's targets, the engine tests and the
# one-rank NCCL worker test (cuda_rank_device_test).
bundle=$root/build/cuda_model_check
if [[ -x $bundle/run.sh ]]; then
  echo "gpu_check: model check from $bundle"
  timeout "${RILL_MODEL_CHECK_TIMEOUT_S:-300}" "$bundle/run.sh" || rc=$((rc ? rc : $?))
else
  echo "gpu_check: no model bundle at $bundle (run tools/cuda_model_bundle.sh and carry it)"
fi
exit $rc
