#!/bin/bash
# Builds every libFuzzer target with clang-14 + ASan + UBSan, outside Bazel
# (Bazel here builds with gcc; the same sources run in CI as *_fuzz_test under
# tools/fuzz/standalone_driver.cc). Needs clang-14 and libclang-rt-14-dev.
# Usage: tools/fuzz/build_fuzzers.sh [target...]   (OUT=/tmp/rill_fuzz by default)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/rill_fuzz}
mkdir -p "$OUT/gen"
# UBSan reports must stop the run, or libFuzzer would count them as passes.
CXX="clang++-14 -std=c++17 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I. -I$OUT/gen"
ABSL="-labsl_status -labsl_statusor -labsl_strings -labsl_strings_internal -labsl_str_format_internal \
  -labsl_cord -labsl_cord_internal -labsl_cordz_info -labsl_cordz_functions -labsl_cordz_handle \
  -labsl_raw_hash_set -labsl_hash -labsl_city -labsl_low_level_hash -labsl_int128 \
  -labsl_throw_delegate -labsl_synchronization -labsl_time -labsl_base -labsl_raw_logging_internal"
LIBS="$ABSL -lglog -lpthread"
L=worker/loader
T=tokenizer
TOK_SRCS="$T/bpe_tokenizer.cc $T/byte_level.cc $T/chat_template.cc $T/incremental_detokenizer.cc \
  $T/json_lite.cc $T/pre_tokenizer.cc $T/tokenizer.cc $T/tokenizer_json.cc $T/unicode_data.cc \
  $T/unicode_table.cc $T/test_util.cc"

build() {  # name sources...
  local name=$1
  shift
  echo "building $name"
  # shellcheck disable=SC2086
  $CXX "$@" -o "$OUT/$name" $LIBS
}

want() { [[ ${#TARGETS[@]} -eq 0 ]] || [[ " ${TARGETS[*]} " == *" $1 "* ]]; }
TARGETS=("$@")

want gguf_fuzzer && build gguf_fuzzer $L/fuzz/gguf_fuzzer.cc $L/gguf.cc $L/ggml_type.cc $L/mapped_file.cc
want safetensors_fuzzer && build safetensors_fuzzer $L/fuzz/safetensors_fuzzer.cc $L/safetensors.cc \
  $L/json.cc $L/ggml_type.cc $L/mapped_file.cc
want json_fuzzer && build json_fuzzer $L/fuzz/json_fuzzer.cc $L/json.cc
# shellcheck disable=SC2086
want tokenizer_fuzzer && build tokenizer_fuzzer frontend/fuzz/tokenizer_fuzzer.cc $TOK_SRCS
# shellcheck disable=SC2086
want chat_template_fuzzer && build chat_template_fuzzer frontend/fuzz/chat_template_fuzzer.cc $TOK_SRCS
if want request_validator_fuzzer; then
  protoc -Iproto --cpp_out="$OUT/gen" proto/rill/v1/inference.proto
  LIBS="$LIBS -lprotobuf" build request_validator_fuzzer frontend/fuzz/request_validator_fuzzer.cc \
    frontend/request_validator.cc "$OUT/gen/rill/v1/inference.pb.cc" $T/unicode_data.cc $T/unicode_table.cc
fi
echo "built into $OUT"
