#!/bin/bash
# Kept for old instructions: all fuzz targets now build from one script.
exec "$(dirname "$0")/../../../tools/fuzz/build_fuzzers.sh" gguf_fuzzer safetensors_fuzzer json_fuzzer
