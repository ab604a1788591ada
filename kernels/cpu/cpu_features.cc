#include "kernels/cpu/cpu_features.h"

#include <atomic>

namespace rill::kernels::cpu {
namespace {

CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
  f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq");
  f.avx512_vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
#endif
  return f;
}

std::atomic<bool> force_scalar{false};
std::atomic<bool> disable_avx512{false};

}  // namespace

CpuFeatures DetectCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

CpuFeatures EnabledCpuFeatures() {
  CpuFeatures f;
  f.avx2 = UseAvx2();
  f.avx512 = UseAvx512();
  f.avx512_vnni = f.avx512 && DetectCpuFeatures().avx512_vnni;
  return f;
}

bool UseAvx2() {
  return DetectCpuFeatures().avx2 && !force_scalar.load(std::memory_order_relaxed);
}

bool UseAvx512() {
  return DetectCpuFeatures().avx512 && UseAvx2() &&
         !disable_avx512.load(std::memory_order_relaxed);
}

void SetForceScalar(bool force) { force_scalar.store(force, std::memory_order_relaxed); }

void SetDisableAvx512(bool disable) { disable_avx512.store(disable, std::memory_order_relaxed); }

}  // namespace rill::kernels::cpu
