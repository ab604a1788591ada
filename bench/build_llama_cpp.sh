#!/usr/bin/env bash
# Builds the llama.cpp peer (llama-bench, llama-batched-bench, llama-server,
# llama-cli) for Rill's
# model-runtime benchmark.
#
# Sources come from PyPI's llama-cpp-python sdist, which vendors llama.cpp
# under vendor/llama.cpp; PyPI is the only network source this project may use
# at run time. Nothing fetched or built here is committed: everything lives in
# bench/.cache/ (git-ignored via bench/.gitignore).
#
# Idempotent: if all binaries already exist, it does nothing. Set
# LLAMA_CPP_FORCE_REBUILD=1 to rebuild anyway.
#
# Env:
#   RILL_VENV               python venv with pip (default: <repo>/.venv)
#   LLAMA_CPP_JOBS          parallel build jobs (default: 2)
#   LLAMA_CPP_FORCE_REBUILD rebuild even if the binaries exist
#   LLAMA_CPP_ISA           native (default) or avx2: an AVX2/FMA/F16C build
#                           without AVX-512, in bench/.cache/llama.cpp-build-avx2,
#                           to compare against Rill with RILL_CPU_NO_AVX512=1
#                           (an AVX2-only CPU emulated on an AVX-512 one)
set -euo pipefail

# Pinned: llama-cpp-python 0.3.36 vendors llama.cpp at a known commit; the
# commit is recorded in bench/.cache/llama.cpp-build/VERSION after a build.
readonly LLAMA_CPP_PYTHON_VERSION="0.3.36"

readonly BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly REPO_ROOT="$(cd "${BENCH_DIR}/.." && pwd)"
readonly CACHE_DIR="${BENCH_DIR}/.cache"
readonly SRC_ROOT="${CACHE_DIR}/llama-cpp-python-${LLAMA_CPP_PYTHON_VERSION}"
readonly LLAMA_SRC="${SRC_ROOT}/vendor/llama.cpp"
readonly ISA="${LLAMA_CPP_ISA:-native}"
case "${ISA}" in
  native)
    readonly BUILD_DIR="${CACHE_DIR}/llama.cpp-build"
    readonly ISA_FLAGS=(-DGGML_NATIVE=ON)
    ;;
  avx2)
    readonly BUILD_DIR="${CACHE_DIR}/llama.cpp-build-avx2"
    readonly ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
      -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF
      -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF)
    ;;
  *)
    echo "error: LLAMA_CPP_ISA must be native or avx2, got ${ISA}" >&2
    exit 2
    ;;
esac
readonly BIN_DIR="${BUILD_DIR}/bin"
readonly JOBS="${LLAMA_CPP_JOBS:-2}"
readonly VENV="${RILL_VENV:-${REPO_ROOT}/.venv}"
# llama-quantize makes the K-quant row's Q4_K_M file (model_runtime_bench.py).
readonly TARGETS=(llama-bench llama-batched-bench llama-server llama-cli llama-quantize)

all_built() {
  local t
  for t in "${TARGETS[@]}"; do
    [[ -x "${BIN_DIR}/${t}" ]] || return 1
  done
  # A build from a different pin is stale.
  [[ -f "${BUILD_DIR}/VERSION" ]] &&
    grep -q "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}" "${BUILD_DIR}/VERSION"
}

if [[ -z "${LLAMA_CPP_FORCE_REBUILD:-}" ]] && all_built; then
  echo "llama.cpp binaries already built in ${BIN_DIR}; skipping."
  exit 0
fi

mkdir -p "${CACHE_DIR}"

# 1. Fetch the sdist (PyPI only) unless already extracted.
if [[ ! -f "${LLAMA_SRC}/CMakeLists.txt" ]]; then
  pip_bin="${VENV}/bin/pip"
  if [[ ! -x "${pip_bin}" ]]; then
    if command -v pip3 >/dev/null; then
      pip_bin="$(command -v pip3)"
    else
      echo "error: no pip found (looked for ${VENV}/bin/pip and pip3); set RILL_VENV" >&2
      exit 1
    fi
  fi
  sdist_dir="${CACHE_DIR}/sdist"
  mkdir -p "${sdist_dir}"
  sdist="${sdist_dir}/llama_cpp_python-${LLAMA_CPP_PYTHON_VERSION}.tar.gz"
  if [[ ! -f "${sdist}" ]]; then
    echo "Downloading llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION} sdist from PyPI..."
    "${pip_bin}" download --no-deps --no-binary :all: \
      -d "${sdist_dir}" "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}"
    # pip may normalise the file name differently across versions.
    found="$(ls "${sdist_dir}"/llama[_-]cpp[_-]python-"${LLAMA_CPP_PYTHON_VERSION}".tar.gz 2>/dev/null | head -1 || true)"
    if [[ -z "${found}" ]]; then
      echo "error: sdist not found in ${sdist_dir} after download" >&2
      exit 1
    fi
    [[ "${found}" == "${sdist}" ]] || mv "${found}" "${sdist}"
  fi
  echo "Extracting ${sdist}..."
  rm -rf "${SRC_ROOT}.tmp"
  mkdir -p "${SRC_ROOT}.tmp"
  tar -xzf "${sdist}" -C "${SRC_ROOT}.tmp" --strip-components=1
  if [[ ! -f "${SRC_ROOT}.tmp/vendor/llama.cpp/CMakeLists.txt" ]]; then
    echo "error: sdist has no vendor/llama.cpp/CMakeLists.txt" >&2
    exit 1
  fi
  rm -rf "${SRC_ROOT}"
  mv "${SRC_ROOT}.tmp" "${SRC_ROOT}"
fi

# 2. Configure + build (CPU only; native ISA so the peer is as fast as it can
# be on this machine, as Rill's kernels are).
echo "Configuring llama.cpp in ${BUILD_DIR}..."
cmake -S "${LLAMA_SRC}" -B "${BUILD_DIR}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DGGML_CUDA=OFF \
  -DGGML_METAL=OFF \
  -DGGML_VULKAN=OFF \
  "${ISA_FLAGS[@]}" \
  -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON \
  -DBUILD_SHARED_LIBS=OFF

start_s="$(date +%s)"
echo "Building ${TARGETS[*]} with -j${JOBS}..."
cmake --build "${BUILD_DIR}" --config Release -j "${JOBS}" --target "${TARGETS[@]}"
end_s="$(date +%s)"

for t in "${TARGETS[@]}"; do
  if [[ ! -x "${BIN_DIR}/${t}" ]]; then
    echo "error: build finished but ${BIN_DIR}/${t} is missing" >&2
    exit 1
  fi
done

build_info="$("${BIN_DIR}/llama-bench" --version 2>&1 | grep -i version | head -1 || true)"
# The sdist's CHANGELOG names the upstream llama.cpp commit it vendors.
upstream="$(sed -n "/^## \[${LLAMA_CPP_PYTHON_VERSION}\]/,/^## /p" "${SRC_ROOT}/CHANGELOG.md" |
  grep -o 'ggml-org/llama.cpp@[0-9a-f]*' | head -1 || true)"
{
  echo "llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}"
  echo "isa: ${ISA}"
  echo "upstream: ${upstream:-unknown}"
  echo "llama.cpp: ${build_info}"
  echo "last_build_seconds=$((end_s - start_s)) jobs=${JOBS}"
} >"${BUILD_DIR}/VERSION"
cat "${BUILD_DIR}/VERSION"
echo "Built in $((end_s - start_s)) s: ${BIN_DIR}"
