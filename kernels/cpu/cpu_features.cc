#include "kernels/cpu/cpu_features.h"

#include <atomic>
#include <cstdlib>

namespace rill::cpu {
namespace {

bool DetectAvx2() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (const char* env = std::getenv("RILL_CPU_FORCE_SCALAR"); env && env[0] == '1') {
    return false;
  }
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

std::atomic<bool> force_scalar{false};

}  // namespace

bool UseAvx2() {
  static const bool has = DetectAvx2();
  return has && !force_scalar.load(std::memory_order_relaxed);
}

void SetForceScalar(bool force) { force_scalar.store(force, std::memory_order_relaxed); }

}  // namespace rill::cpu
