#!/bin/bash
# Runs the CUDA model checker. Without a GPU it must say it skipped and exit
# 0 (before touching the model file); with one, it must pass its checks.
set -u
out=$("$1" --nobench 2>&1)
rc=$?
echo "$out"
if [[ $rc -ne 0 ]]; then
  echo "checker exited with $rc" >&2
  exit 1
fi
if ! grep -q -e "^skipped: no CUDA device$" -e "^correctness: PASS" <<<"$out"; then
  echo "checker neither skipped nor passed" >&2
  exit 1
fi
