// The kernel family a test runs (cpu_features.h), for tests that check each
// path: the widest the CPU has (AVX-512 where present), AVX2 with AVX-512
// turned off, or the scalar fallbacks.
#ifndef RILL_KERNELS_CPU_KERNEL_PATH_FOR_TEST_H_
#define RILL_KERNELS_CPU_KERNEL_PATH_FOR_TEST_H_

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_features.h"

namespace rill::kernels::cpu {

enum class KernelPath { kWidest, kAvx2, kScalar };

inline void UseKernelPath(KernelPath p) {
  SetForceScalar(p == KernelPath::kScalar);
  SetDisableAvx512(p == KernelPath::kAvx2);
}

inline const char* KernelPathName(KernelPath p) {
  switch (p) {
    case KernelPath::kWidest: return "Widest";
    case KernelPath::kAvx2: return "Avx2";
    case KernelPath::kScalar: return "Scalar";
  }
  return "?";
}

// A fixture parameterised by the path, restored to the widest after each
// test. Instantiate with INSTANTIATE_KERNEL_PATHS(Fixture).
class KernelPathTest : public ::testing::TestWithParam<KernelPath> {
 protected:
  void SetUp() override { UseKernelPath(GetParam()); }
  void TearDown() override { UseKernelPath(KernelPath::kWidest); }
};

}  // namespace rill::kernels::cpu

#define INSTANTIATE_KERNEL_PATHS(fixture)                                       \
  INSTANTIATE_TEST_SUITE_P(                                                     \
      Paths, fixture,                                                           \
      ::testing::Values(::rill::kernels::cpu::KernelPath::kWidest,              \
                        ::rill::kernels::cpu::KernelPath::kAvx2,                \
                        ::rill::kernels::cpu::KernelPath::kScalar),             \
      [](const ::testing::TestParamInfo<::rill::kernels::cpu::KernelPath>& i) { \
        return std::string(::rill::kernels::cpu::KernelPathName(i.param));      \
      })

#endif  // RILL_KERNELS_CPU_KERNEL_PATH_FOR_TEST_H_
