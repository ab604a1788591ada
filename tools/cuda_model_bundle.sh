#!/bin/bash
# Packs the CUDA model checker for a GPU box that has the CUDA 13 driver and
# runtime but no Bazel, absl or model cache, into build/cuda_model_check/
# (git-ignored): the binary, the shared libraries it needs beyond glibc and
# CUDA (absl, glog, gflags, libstdc++...), the default model cut to its first
# LAYERS layers (the whole file, 98 MB, exceeds the 64 MiB a device run may
# carry), and run.sh, which runs the checker with the benchmark timed at the
# full 30-layer depth.
#
#   tools/cuda_model_bundle.sh [--layers=6] [--model=PATH]
#
# Then, on the GPU box (the device tool: carry ["build/cuda_model_check"]):
#   build/cuda_model_check/run.sh [extra checker flags]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
layers=6
model=${HOME}/.cache/rill/models/SmolLM2-135M-Instruct.Q4_1.gguf
for a in "$@"; do
  case $a in
    --layers=*) layers=${a#--layers=} ;;
    --model=*) model=${a#--model=} ;;
    *) echo "cuda_model_bundle: unknown argument $a" >&2; exit 2 ;;
  esac
done
[[ -f $model ]] || { echo "cuda_model_bundle: no model at $model" >&2; exit 1; }

cd "$root"
bazel build //worker/models/cuda:cuda_model_check //worker/models/cuda:trim_gguf \
  //engine:async_llm_engine_device_test
bin=bazel-bin/worker/models/cuda/cuda_model_check
[[ -x $bin ]] || { echo "cuda_model_bundle: $bin not built (no CUDA toolkit?)" >&2; exit 1; }
# The engine on device cuda (AsyncLLMEngine over CudaModelExecutor) against
# the CPU engine, and Sleep/WakeUp on the GPU.
engine_test=bazel-bin/engine/async_llm_engine_device_test

out=build/cuda_model_check
rm -rf "$out"
mkdir -p "$out/lib"
cp "$bin" "$out/cuda_model_check"
cp "$engine_test" "$out/engine_device_test"
chmod u+w "$out/cuda_model_check" "$out/engine_device_test"
# One CUDA rank in a rill-worker process over NCCL against the in-process
# CUDA engine (engine/cuda_rank_device_test.cc); the test finds rill-worker
# next to itself.
bazel build //worker:rill-worker //engine:cuda_rank_device_test
rank_bins=(bazel-bin/worker/rill-worker bazel-bin/engine/cuda_rank_device_test)
cp "${rank_bins[@]}" "$out/"
chmod u+w "$out/rill-worker" "$out/cuda_rank_device_test"

# Every resolved library except glibc's own (the box's newer glibc serves
# this build) and CUDA's (the box's toolkit and driver provide them). NCCL
# (the tensor-parallel check) cannot travel: libnccl.so.2 is 208 MiB
# (CUDA 13's, every GPU architecture) and compresses to 184 MiB (zstd: its
# device code is already compressed), three times the 60 MiB budget. The
# GPU box's image has it in PyTorch's nvidia-nccl-cu13 wheel, which run.sh
# puts on the library path; run.sh names the one it found.
{ ldd "$bin"; ldd "$engine_test"; ldd "${rank_bins[@]}"; } | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
while read -r lib; do
  case $(basename "$lib") in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libresolv.so*) ;;
    libcuda.so*|libcudart.so*|libcublas*.so*|libnccl.so*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done

# Symbol tables the box does not need (.dynsym stays, so linking and glog's
# stack traces still work): ~2 MB that keep the 6-layer bundle under 60 MiB.
chmod u+w "$out/lib/"*
strip --strip-unneeded "$out/cuda_model_check" "$out/engine_device_test" "$out/lib/"*
strip --strip-unneeded "$out/rill-worker" "$out/cuda_rank_device_test"
# lib/ travels gzipped (~a third of its size; run.sh unpacks it), which keeps
# the bundle with the worker-rank test under 60 MiB.
tar -C "$out" -czf "$out/lib.tar.gz" lib
rm -rf "$out/lib"

bazel-bin/worker/models/cuda/trim_gguf --in="$model" --out="$out/model.gguf" --layers="$layers"

cat >"$out/run.sh" <<'RUN'
#!/bin/bash
# Runs the CUDA model checker from its bundle (see tools/cuda_model_bundle.sh).
set -u
dir=$(cd "$(dirname "$0")" && pwd)
# The bundled libraries come gzipped: unpack them once (beside run.sh, or in
# a temporary directory when the bundle is read-only).
libdir=$dir/lib
if [[ ! -d $libdir ]]; then
  if ! tar -C "$dir" -xzf "$dir/lib.tar.gz" 2>/dev/null; then
    libdir=$(mktemp -d)/lib
    tar -C "$(dirname "$libdir")" -xzf "$dir/lib.tar.gz"
  fi
fi
# CUDA 13 libraries: the toolkit's, else pip's nvidia-* wheels (PyTorch's).
cuda_dirs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib \
         $(ls -d /usr/local/lib/python3*/dist-packages/nvidia/*/lib /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib 2>/dev/null); do
  [[ -d $d ]] && cuda_dirs="$cuda_dirs:$d"
done
export LD_LIBRARY_PATH="$libdir$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing=$(ldd "$dir/cuda_model_check" "$dir/engine_device_test" | grep "not found" || true)
if [[ -n $missing ]]; then
  echo "cuda_model_check: missing shared libraries:" >&2
  echo "$missing" >&2
  exit 3
fi
echo "cuda_model_check: $(ldd "$dir/cuda_model_check" | grep -o 'libnccl[^ ]* => [^ ]*' || echo 'libnccl not linked')"
"$dir/cuda_model_check" --model="$dir/model.gguf" --bench_layers=30 "$@"
rc=$?
# The engine on the GPU (model cut to the bundle's layers): greedy tokens
# against the CPU engine, Sleep/WakeUp; its gtest summary ends the output.
echo "engine_device_test: AsyncLLMEngine with device cuda"
RILL_TEST_MODEL="$dir/model.gguf" "$dir/engine_device_test" || rc=$((rc ? rc : $?))
# One CUDA rank in a rill-worker process (NCCL) against the in-process CUDA
# engine: greedy tokens equal. It needs libnccl.so.2 on the box or in lib/.
echo "cuda_rank_device_test: --distributed_executor_backend=mp, one rank over NCCL"
rank_missing=$(ldd "$dir/rill-worker" "$dir/cuda_rank_device_test" | grep "not found" || true)
if [[ -n $rank_missing ]]; then
  echo "cuda_rank_device_test: skipped, missing shared libraries: $rank_missing"
else
  RILL_TEST_MODEL="$dir/model.gguf" "$dir/cuda_rank_device_test" || rc=$((rc ? rc : $?))
fi
exit $rc
RUN
chmod +x "$out/run.sh"

du -sh "$out" "$out/lib.tar.gz" "$out/model.gguf"
size=$(du -sb "$out" | cut -f1)
if (( size > 60 * 1024 * 1024 )); then
  echo "cuda_model_bundle: $out is $size bytes: over 60 MiB, too big to carry with the tree;" \
       "use fewer --layers" >&2
  exit 1
fi
echo "bundle ready: carry [\"$out\"], run $out/run.sh"
