// Run-time choice between the AVX2/FMA kernels and the portable scalar ones.
#ifndef RILL_KERNELS_CPU_CPU_FEATURES_H_
#define RILL_KERNELS_CPU_CPU_FEATURES_H_

namespace rill::cpu {

// True when the CPU has AVX2, FMA and F16C and scalar mode is not forced.
bool UseAvx2();

// Forces the scalar fallbacks (tests compare both paths; also a debug knob).
// Not thread-safe against concurrent kernel calls: set it before running.
void SetForceScalar(bool force);

}  // namespace rill::cpu

#endif  // RILL_KERNELS_CPU_CPU_FEATURES_H_
