#include "kernels/cpu/kernel_plan.h"

#include <cstdlib>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"

namespace rill::kernels::cpu {
namespace {

absl::StatusOr<MatmulKind> ParseMatmul(absl::string_view name) {
  if (name == "auto" || name == "exact") return MatmulKind::kExact;
  if (name == "int16") return MatmulKind::kInt16;
  if (name == "q8") return MatmulKind::kQ8;
  return absl::InvalidArgumentError(absl::StrCat(
      "matmul '", name, "' is not supported (expected auto, exact, int16 or q8)"));
}

// The value of environment variable `name`, logged when set.
const char* Override(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') return nullptr;
  LOG(INFO) << "kernel plan override from the environment: " << name << "=" << v;
  return v;
}

}  // namespace

absl::string_view MatmulKindName(MatmulKind kind) {
  switch (kind) {
    case MatmulKind::kExact: return "exact";
    case MatmulKind::kInt16: return "int16";
    case MatmulKind::kQ8: return "q8";
  }
  return "?";
}

std::string KernelPlan::Describe() const {
  std::string weights;
  switch (matmul) {
    case MatmulKind::kExact:
      weights = interleaved ? "f32 activations, interleaved weights"
                            : "f32 activations, row-major weights";
      break;
    case MatmulKind::kInt16:
      weights =
          "int16 activations, VNNI-packed Q4_0/Q4_1/Q8_0 weights; other types on the exact "
          "interleaved kernels";
      break;
    case MatmulKind::kQ8: weights = "8-bit activations, file weights"; break;
  }
  return absl::StrCat(MatmulKindName(matmul), " (", weights, "), ",
                      avx512 ? "avx512" : avx2 ? "avx2" : "scalar");
}

absl::StatusOr<KernelPlan> ChooseKernelPlan(const KernelPlanOptions& options) {
  absl::StatusOr<MatmulKind> kind = ParseMatmul(options.matmul);
  if (!kind.ok()) return kind.status();
  KernelPlan plan;
  plan.matmul = *kind;
  plan.avx2 = options.features.avx2 && !options.force_scalar;
  plan.avx512 = plan.avx2 && options.features.avx512 && !options.no_avx512;
  if (plan.matmul == MatmulKind::kInt16 && !(plan.avx512 && options.features.avx512_vnni)) {
    return absl::FailedPreconditionError(
        "matmul int16 needs AVX-512 VNNI, which this CPU lacks or which is turned off; use "
        "auto or exact");
  }
  // The interleaved kernels need AVX2 and keep the exact path's numerics,
  // so they are exact's default wherever they run.
  plan.interleaved = plan.matmul == MatmulKind::kExact && plan.avx2 &&
                     options.interleaved.value_or(true);
  return plan;
}

KernelPlanOptions KernelPlanOptionsFromEnvironment(absl::string_view matmul) {
  KernelPlanOptions options;
  options.matmul = std::string(matmul);
  options.features = DetectCpuFeatures();
  if (const char* v = Override("RILL_CPU_FORCE_SCALAR")) options.force_scalar = v[0] == '1';
  if (const char* v = Override("RILL_CPU_NO_AVX512")) options.no_avx512 = v[0] == '1';
  if (const char* v = Override("RILL_CPU_INTERLEAVED")) options.interleaved = v[0] == '1';
  return options;
}

absl::StatusOr<KernelPlan> SetUpKernelPlan(absl::string_view matmul) {
  absl::StatusOr<KernelPlan> plan = ChooseKernelPlan(KernelPlanOptionsFromEnvironment(matmul));
  if (!plan.ok()) return plan.status();
  SetForceScalar(!plan->avx2);
  SetDisableAvx512(!plan->avx512);
  LOG(INFO) << "kernel plan: " << plan->Describe();
  return plan;
}

KernelPlan DefaultKernelPlan() {
  absl::StatusOr<KernelPlan> plan = ChooseKernelPlan(KernelPlanOptions{});
  CHECK(plan.ok()) << plan.status();  // "auto" is valid on every CPU
  return *plan;
}

}  // namespace rill::kernels::cpu
