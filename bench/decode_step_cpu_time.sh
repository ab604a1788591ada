#!/bin/bash
# CPU time per decode step of `rill bench-model`, for a machine others load:
# process task-clock (perf stat) of two one-thread runs that differ only in
# --gen_tokens, so model loading and prefill cancel and time spent waiting
# for a core does not count. Prints ms per step and the % of one core's f32
# FMA peak (PEAK_GFLOPS, default the quiet Xeon figure in bench/README.md).
#   flock /work/bench.lock bench/decode_step_cpu_time.sh 1,4,8,32 OLD_RILL NEW_RILL
set -euo pipefail
BATCHES=$1; shift
G1=${G1:-4}; G2=${G2:-24}; PEAK_GFLOPS=${PEAK_GFLOPS:-173.3}; MFLOP_PER_TOKEN=${MFLOP_PER_TOKEN:-269}
cpu_ms() { perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | grep task-clock | cut -d, -f1; }
for b in ${BATCHES//,/ }; do
  for bin in "$@"; do
    a=$(cpu_ms "$bin" bench-model --threads=1 --prompt_tokens=8 --gen_tokens="$G1" --batch="$b" --roofline=false)
    c=$(cpu_ms "$bin" bench-model --threads=1 --prompt_tokens=8 --gen_tokens="$G2" --batch="$b" --roofline=false)
    python3 -c "
a, c, b, g = $a, $c, $b, $G2 - $G1
ms = (c - a) / g
gflops = b * $MFLOP_PER_TOKEN / ms
print(f'batch {b:3d} {\"$bin\":40s} cpu ms/step {ms:7.2f}  {gflops:6.1f} GFLOP/cpu-s = {gflops / $PEAK_GFLOPS * 100:4.1f}% of one core')"
  done
done
