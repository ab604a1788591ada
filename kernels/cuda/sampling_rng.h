// Counter-based random numbers shared by the CUDA sampler and its CPU
// reference, so a (seed, step, row) triple draws the same uniform on both;
// and the one logit edit rule they (and the host's worker::ApplyLogitEdits)
// share.
#ifndef RILL_KERNELS_CUDA_SAMPLING_RNG_H_
#define RILL_KERNELS_CUDA_SAMPLING_RNG_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define RILL_HD __host__ __device__
#else
#define RILL_HD
#endif

namespace rill::kernels::cuda {

RILL_HD inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 24 random bits (exact in float).
RILL_HD inline float SampleUniform(uint64_t seed, uint64_t step) {
  uint64_t r = SplitMix64(SplitMix64(seed) ^ (step * 0xD1B54A32D192ED03ull));
  return static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
}

// Float -> uint32 whose unsigned order is the float order (for exact
// k-th-largest searches by bisection on keys).
RILL_HD inline uint32_t OrderedKey(float f) {
  uint32_t u;
  static_assert(sizeof(u) == sizeof(f), "float is 32 bits");
  memcpy(&u, &f, 4);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// A logit after one LogitEdit (cuda_kernels.h): repetition, then subtract,
// add, mask, in that order, so every side gets the same bits.
RILL_HD inline float EditedLogit(float l, float repetition, float subtract, float add, bool mask) {
  if (repetition != 1.0f) l = l > 0.0f ? l / repetition : l * repetition;
  l -= subtract;
  l += add;
  return mask ? -INFINITY : l;
}

}  // namespace rill::kernels::cuda

#endif  // RILL_KERNELS_CUDA_SAMPLING_RNG_H_
