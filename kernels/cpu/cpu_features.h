// Run-time choice between the AVX-512, AVX2/FMA and portable scalar kernels.
#ifndef RILL_KERNELS_CPU_CPU_FEATURES_H_
#define RILL_KERNELS_CPU_CPU_FEATURES_H_

// The target of functions that may only run where UseAvx512(): the ISA
// extensions it checks, plus the AVX2 ones they build on.
#define RILL_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

namespace rill::cpu {

// True when the CPU has AVX2, FMA and F16C and scalar mode is not forced.
bool UseAvx2();

// True when UseAvx2() and the CPU has AVX-512 F/BW/VL/DQ, and neither
// SetDisableAvx512(true) nor RILL_CPU_NO_AVX512=1 turned it off.
bool UseAvx512();

// Forces the scalar fallbacks (tests compare both paths; also a debug knob).
// Not thread-safe against concurrent kernel calls: set it before running.
void SetForceScalar(bool force);

// Keeps the AVX2 kernels even where AVX-512 exists (tests compare them).
// Same threading caveat as SetForceScalar.
void SetDisableAvx512(bool disable);

}  // namespace rill::cpu

#endif  // RILL_KERNELS_CPU_CPU_FEATURES_H_
