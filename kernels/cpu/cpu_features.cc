#include "kernels/cpu/cpu_features.h"

#include <atomic>
#include <cstdlib>

namespace rill::cpu {
namespace {

bool EnvIsOne(const char* name) {
  const char* env = std::getenv(name);
  return env && env[0] == '1';
}

bool DetectAvx2() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (EnvIsOne("RILL_CPU_FORCE_SCALAR")) return false;
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool DetectAvx512() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (EnvIsOne("RILL_CPU_NO_AVX512")) return false;
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

std::atomic<bool> force_scalar{false};
std::atomic<bool> disable_avx512{false};

}  // namespace

bool UseAvx2() {
  static const bool has = DetectAvx2();
  return has && !force_scalar.load(std::memory_order_relaxed);
}

bool UseAvx512() {
  static const bool has = DetectAvx512();
  return has && UseAvx2() && !disable_avx512.load(std::memory_order_relaxed);
}

void SetForceScalar(bool force) { force_scalar.store(force, std::memory_order_relaxed); }

void SetDisableAvx512(bool disable) { disable_avx512.store(disable, std::memory_order_relaxed); }

}  // namespace rill::cpu
