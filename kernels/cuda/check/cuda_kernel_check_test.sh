#!/bin/bash
# Runs the CUDA kernel checker without the benchmark. Without a GPU the
# checker must say it skipped and exit 0; with one, every check must pass.
set -u
out=$("$1" --no-bench 2>&1)
rc=$?
echo "$out"
if [[ $rc -ne 0 ]]; then
  echo "checker exited with $rc" >&2
  exit 1
fi
if ! grep -q -e "^skipped: no CUDA device$" -e "^0 of [0-9]* checks failed$" <<<"$out"; then
  echo "checker neither skipped nor reported a clean run" >&2
  exit 1
fi
