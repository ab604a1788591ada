// Run-time choice between the AVX-512, AVX2/FMA and portable scalar kernels.
// What the hardware has is detected here; which of it a process uses is the
// kernel plan's choice (kernel_plan.h), applied once at start-up through
// SetForceScalar / SetDisableAvx512. Nothing here reads the environment.
#ifndef RILL_KERNELS_CPU_CPU_FEATURES_H_
#define RILL_KERNELS_CPU_CPU_FEATURES_H_

// The target of functions that may only run where UseAvx512(): the ISA
// extensions it checks, plus the AVX2 ones they build on.
#define RILL_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

namespace rill::kernels::cpu {

// The instruction-set extensions the kernels can use.
struct CpuFeatures {
  bool avx2 = false;         // AVX2 + FMA + F16C
  bool avx512 = false;       // AVX-512 F/BW/VL/DQ
  bool avx512_vnni = false;  // AVX-512 VNNI (the int16 packed kernels)
};

// What this CPU has (cached after the first call; thread-safe).
CpuFeatures DetectCpuFeatures();

// What the kernels use now: DetectCpuFeatures() less what SetForceScalar /
// SetDisableAvx512 turned off.
CpuFeatures EnabledCpuFeatures();

// True when the CPU has AVX2, FMA and F16C and scalar mode is not forced.
bool UseAvx2();

// True when UseAvx2() and the CPU has AVX-512 F/BW/VL/DQ, and
// SetDisableAvx512(true) did not turn it off.
bool UseAvx512();

// Forces the scalar fallbacks (the kernel plan's scalar override; tests
// compare both paths). Not thread-safe against concurrent kernel calls: set
// it before running.
void SetForceScalar(bool force);

// Keeps the AVX2 kernels even where AVX-512 exists (the kernel plan's
// no-AVX-512 override; tests compare them). Same threading caveat as
// SetForceScalar.
void SetDisableAvx512(bool disable);

}  // namespace rill::kernels::cpu

#endif  // RILL_KERNELS_CPU_CPU_FEATURES_H_
