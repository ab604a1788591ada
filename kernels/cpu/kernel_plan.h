// The CPU kernel family a process runs, chosen once at load time from the
// CPU's features and the `matmul` option, logged, reported by the engine's
// config, and handed to the model code (worker::ModelOptions), which packs
// its weights for it. Kernels never read the environment: the few
// environment overrides (A/B and debugging runs) are read once here.
#ifndef RILL_KERNELS_CPU_KERNEL_PLAN_H_
#define RILL_KERNELS_CPU_KERNEL_PLAN_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/cpu_features.h"

namespace rill::kernels::cpu {

// How quantized weights meet activations in the matrix products.
enum class MatmulKind {
  // f32 activations against the file's quantized weights: matches a float64
  // reference to ~1e-5 relative. The default ("auto").
  kExact,
  // Exact's weights repacked for the AVX-512 VNNI kernels with int16
  // activations: ~1.5-2x decode and prefill, batch invariant, logits
  // ~1e-4 (rarely 1e-3) from the reference. Needs AVX-512 VNNI. Only
  // Q4_0, Q4_1 and Q8_0 have int16 kernels: the other types (Q5_x, the
  // K-quants) run exact's interleaved kernels (logged once per type).
  kInt16,
  // 8-bit activations and integer dot products, as llama.cpp: faster
  // prefill than exact, ~1e-2 relative logit error.
  kQ8,
};

// The `matmul` option's value for each kind: "exact", "int16", "q8".
absl::string_view MatmulKindName(MatmulKind kind);

// The accepted `matmul` values with one line each, for flag help texts.
inline constexpr char kMatmulHelp[] =
    "How quantized weights meet activations on the CPU: auto (= exact); exact (f32 "
    "activations, matches a float64 reference to ~1e-5); int16 (exact's weights repacked for "
    "the AVX-512 VNNI kernels with int16 activations: ~1.5-2x faster, logits ~1e-4 off; needs "
    "AVX-512 VNNI; Q4_0/Q4_1/Q8_0 only, other types run exact's kernels); q8 (8-bit activations as llama.cpp: faster prefill, ~1e-2 logit error).";

struct KernelPlanOptions {
  std::string matmul = "auto";  // auto, exact, int16 or q8
  // What the CPU offers; tests pass other combinations.
  CpuFeatures features = EnabledCpuFeatures();
  // Start-up overrides (see KernelPlanOptionsFromEnvironment).
  bool force_scalar = false;             // RILL_CPU_FORCE_SCALAR=1
  bool no_avx512 = false;                // RILL_CPU_NO_AVX512=1
  std::optional<bool> interleaved;       // RILL_CPU_INTERLEAVED=0|1; unset: the default
};

struct KernelPlan {
  MatmulKind matmul = MatmulKind::kExact;
  bool avx2 = false;    // the AVX2/FMA kernels (else the scalar fallbacks)
  bool avx512 = false;  // the AVX-512 kernels where they exist
  // Exact weights (Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 and Q2_K-Q6_K) repacked into
  // 8-row interleaved groups (packed_matmul.h): against the row-major chunk
  // kernels, batch-1 decode is 1.35-1.4x as fast and batches 8-32 as fast or
  // faster, same numerics (the types without chunk kernels, Q5_x and the
  // K-quants, 7-17x their dequantize-then-dot fallback).
  bool interleaved = false;

  // Whether the activations stay f32 (WeightMatrix::float_activations).
  bool float_activations() const { return matmul != MatmulKind::kQ8; }
  // Whether quantized weights get repacked at load (int16: Q4_0/Q4_1/Q8_0
  // for its kernels, the rest as interleaved; interleaved: those, Q5_0/Q5_1
  // and the K-quants).
  bool packs_weights() const {
    return matmul == MatmulKind::kInt16 || (matmul == MatmulKind::kExact && interleaved);
  }
  // One line for logs and the config RPC, e.g. "exact (f32 activations,
  // interleaved weights), avx512".
  std::string Describe() const;
};

// The plan for `options`. InvalidArgument naming the accepted values for an
// unknown matmul; FailedPrecondition for int16 on a CPU without AVX-512 VNNI
// (or with AVX-512 turned off).
absl::StatusOr<KernelPlan> ChooseKernelPlan(const KernelPlanOptions& options);

// Options for `matmul` with this CPU's features and the environment's
// overrides (each one found is logged).
KernelPlanOptions KernelPlanOptionsFromEnvironment(absl::string_view matmul);

// The process's plan at load: ChooseKernelPlan over
// KernelPlanOptionsFromEnvironment(matmul), applied to the ISA switches of
// cpu_features.h and logged in one line. Call once per process, before any
// kernel runs (entry points: the engine, rill-worker, the CLI).
absl::StatusOr<KernelPlan> SetUpKernelPlan(absl::string_view matmul);

// The plan of "auto" over the features enabled now, no environment: what
// models run when their caller names no plan (tests, tools).
KernelPlan DefaultKernelPlan();

}  // namespace rill::kernels::cpu

#endif  // RILL_KERNELS_CPU_KERNEL_PLAN_H_
