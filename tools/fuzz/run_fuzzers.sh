#!/bin/bash
# Runs each libFuzzer target built by build_fuzzers.sh for a while, one at a
# time, starting from the checked-in corpus; new inputs go to a scratch
# corpus under $OUT/work (the repo's corpus stays small), crashes to
# $OUT/artifacts. Prints executions and findings per target.
# Usage: tools/fuzz/run_fuzzers.sh [seconds per target (180)] [target...]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/rill_fuzz}
SECS=${1:-180}
shift || true
declare -A CORPUS=(
  [gguf_fuzzer]=worker/loader/fuzz/corpus/gguf
  [safetensors_fuzzer]=worker/loader/fuzz/corpus/safetensors
  [json_fuzzer]=worker/loader/fuzz/corpus/json
  [tokenizer_fuzzer]=frontend/fuzz/corpus/tokenizer
  [chat_template_fuzzer]=frontend/fuzz/corpus/chat_template
  [request_validator_fuzzer]=frontend/fuzz/corpus/request_validator
)
TARGETS=("$@")
[[ ${#TARGETS[@]} -eq 0 ]] && TARGETS=(gguf_fuzzer safetensors_fuzzer json_fuzzer tokenizer_fuzzer \
  chat_template_fuzzer request_validator_fuzzer)
mkdir -p "$OUT/logs" "$OUT/artifacts"
printf "%-26s %8s %12s %8s %10s %10s %s\n" target seconds executions exec/s peak_MB seed findings
for t in "${TARGETS[@]}"; do
  mkdir -p "$OUT/work/$t"
  log="$OUT/logs/$t.log"
  dict=()
  d="$(dirname "$(dirname "${CORPUS[$t]}")")/${t%_fuzzer}.dict"
  [[ -f $d ]] && dict=(-dict="$d")
  "$OUT/$t" -max_total_time="$SECS" -max_len=4096 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    "${dict[@]}" -artifact_prefix="$OUT/artifacts/$t-" "$OUT/work/$t" "${CORPUS[$t]}" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  eps=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  seed=$(grep -o 'Seed: [0-9]*' "$log" | head -1 | grep -o '[0-9]*')
  found=$(ls "$OUT/artifacts" | grep -c "^$t-" || true)
  verdict="none"
  [[ $rc -ne 0 || $found -gt 0 ]] && verdict="rc=$rc, $found artifact(s): see $log"
  printf "%-26s %8s %12s %8s %10s %10s %s\n" "$t" "$SECS" "${execs:-?}" "${eps:-?}" "${rss:-?}" \
    "${seed:-?}" "$verdict"
done
