// Measured arithmetic and memory ceilings of this machine, for roofline rows
// in the benchmarks: a ratio such as "batch 32 / batch 1" can only be judged
// against what the cores can do at all, measured in the same run.
#ifndef RILL_KERNELS_CPU_PEAK_RATE_H_
#define RILL_KERNELS_CPU_PEAK_RATE_H_

#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace rill::kernels::cpu {

struct PeakRate {
  double ops = 0;      // arithmetic operations done (an FMA counts 2)
  double seconds = 0;  // wall time over all threads
  double per_second() const { return seconds > 0 ? ops / seconds : 0; }
  // Every accumulator's final value, combined: tests check it against the
  // closed form, which also proves the loop was not optimised away.
  double checksum = 0;
  int lanes = 0;  // vector width of the f32 FMA measure (8 = ymm, 16 = zmm)
};

// f32 fused multiply-add throughput: each pool thread runs `iterations`
// rounds of 12 independent FMA chains (x = 0.5 x + 0.5), enough chains to
// cover the FMA latency on two pipes, 16 wide where UseAvx512() (what the
// matmul kernels then use) and 8 wide otherwise (r.lanes says which). Every
// chain ends at exactly 1.0 once iterations >= 64, so checksum =
// threads * 12 * lanes.
PeakRate MeasureF32FmaPeak(ThreadPool* pool, int64_t iterations);

// int16 multiply-accumulate throughput with AVX-512 VNNI (vpdpwssd, 32 pairs
// per instruction; an int16 multiply-add counts 2 ops): 12 chains per thread,
// chain c's lanes starting at c and gaining 1*1 + 1*1 per round, so checksum
// = threads * 16 * (66 + 12 * 2 * iterations). Returns ops = 0 where the CPU has no AVX-512 VNNI.
PeakRate MeasureInt16VnniPeak(ThreadPool* pool, int64_t iterations);

// Read bandwidth: the pool sums a `bytes` buffer `passes` times; ops counts
// bytes read. checksum = passes * bytes / 4 (the buffer holds 1.0f floats).
PeakRate MeasureReadBandwidth(ThreadPool* pool, int64_t bytes, int passes);

}  // namespace rill::kernels::cpu

#endif  // RILL_KERNELS_CPU_PEAK_RATE_H_
