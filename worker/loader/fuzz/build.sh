#!/bin/bash
# Builds the libFuzzer targets with clang-14 outside Bazel (see README.md).
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/rill_fuzz}
mkdir -p "$OUT"
CXX="clang++-14 -std=c++17 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -I."
LIBS="-labsl_status -labsl_statusor -labsl_strings -labsl_str_format_internal -labsl_cord \
  -labsl_cordz_info -labsl_raw_hash_set -labsl_hash -labsl_city -labsl_low_level_hash -lglog -lpthread"
L=worker/loader
$CXX $L/fuzz/gguf_fuzzer.cc $L/gguf.cc $L/ggml_type.cc $L/mapped_file.cc -o "$OUT/gguf_fuzzer" $LIBS
$CXX $L/fuzz/safetensors_fuzzer.cc $L/safetensors.cc $L/json.cc $L/ggml_type.cc $L/mapped_file.cc \
  -o "$OUT/safetensors_fuzzer" $LIBS
$CXX $L/fuzz/json_fuzzer.cc $L/json.cc -o "$OUT/json_fuzzer" $LIBS
echo "built into $OUT"
