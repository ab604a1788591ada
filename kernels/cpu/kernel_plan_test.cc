#include "kernels/cpu/kernel_plan.h"

#include <gtest/gtest.h>

#include "absl/status/status.h"

namespace rill::kernels::cpu {
namespace {

constexpr CpuFeatures kScalarCpu{};
constexpr CpuFeatures kAvx2Cpu{.avx2 = true};
constexpr CpuFeatures kAvx512Cpu{.avx2 = true, .avx512 = true};
constexpr CpuFeatures kVnniCpu{.avx2 = true, .avx512 = true, .avx512_vnni = true};

KernelPlan Choose(const std::string& matmul, const CpuFeatures& features) {
  KernelPlanOptions options;
  options.matmul = matmul;
  options.features = features;
  absl::StatusOr<KernelPlan> plan = ChooseKernelPlan(options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.value_or(KernelPlan{});
}

TEST(ChooseKernelPlan, AutoIsExactWithTheWidestIsa) {
  const KernelPlan vnni = Choose("auto", kVnniCpu);
  EXPECT_EQ(vnni.matmul, MatmulKind::kExact);
  EXPECT_TRUE(vnni.avx2);
  EXPECT_TRUE(vnni.avx512);
  EXPECT_TRUE(vnni.interleaved);
  EXPECT_TRUE(vnni.float_activations());
  EXPECT_TRUE(vnni.packs_weights());
  EXPECT_EQ(vnni.Describe(), "exact (f32 activations, interleaved weights), avx512");

  const KernelPlan avx2 = Choose("auto", kAvx2Cpu);
  EXPECT_EQ(avx2.matmul, MatmulKind::kExact);
  EXPECT_TRUE(avx2.avx2);
  EXPECT_FALSE(avx2.avx512);
  EXPECT_TRUE(avx2.interleaved);
  EXPECT_EQ(avx2.Describe(), "exact (f32 activations, interleaved weights), avx2");

  // The interleaved kernels need AVX2: a scalar CPU keeps the file's rows.
  const KernelPlan scalar = Choose("auto", kScalarCpu);
  EXPECT_FALSE(scalar.avx2);
  EXPECT_FALSE(scalar.avx512);
  EXPECT_FALSE(scalar.interleaved);
  EXPECT_FALSE(scalar.packs_weights());
  EXPECT_EQ(scalar.Describe(), "exact (f32 activations, row-major weights), scalar");
}

TEST(ChooseKernelPlan, ExactIsAuto) {
  const KernelPlan a = Choose("auto", kAvx512Cpu), e = Choose("exact", kAvx512Cpu);
  EXPECT_EQ(a.Describe(), e.Describe());
}

TEST(ChooseKernelPlan, Int16NeedsVnni) {
  const KernelPlan plan = Choose("int16", kVnniCpu);
  EXPECT_EQ(plan.matmul, MatmulKind::kInt16);
  EXPECT_TRUE(plan.float_activations());
  EXPECT_TRUE(plan.packs_weights());
  EXPECT_FALSE(plan.interleaved);
  EXPECT_EQ(plan.Describe(),
            "int16 (int16 activations, VNNI-packed Q4_0/Q4_1/Q8_0 weights; other types on the "
            "exact interleaved kernels), avx512");

  for (const CpuFeatures& f : {kScalarCpu, kAvx2Cpu, kAvx512Cpu}) {
    KernelPlanOptions options;
    options.matmul = "int16";
    options.features = f;
    EXPECT_EQ(ChooseKernelPlan(options).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  // Turning AVX-512 off turns VNNI off with it.
  KernelPlanOptions no_avx512;
  no_avx512.matmul = "int16";
  no_avx512.features = kVnniCpu;
  no_avx512.no_avx512 = true;
  EXPECT_EQ(ChooseKernelPlan(no_avx512).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ChooseKernelPlan, Q8KeepsFileWeightsAndQuantizesActivations) {
  const KernelPlan plan = Choose("q8", kVnniCpu);
  EXPECT_EQ(plan.matmul, MatmulKind::kQ8);
  EXPECT_FALSE(plan.float_activations());
  EXPECT_FALSE(plan.interleaved);
  EXPECT_FALSE(plan.packs_weights());
  EXPECT_TRUE(plan.avx512);
  EXPECT_EQ(plan.Describe(), "q8 (8-bit activations, file weights), avx512");
}

TEST(ChooseKernelPlan, OverridesNarrowTheIsaAndTheLayout) {
  KernelPlanOptions options;
  options.features = kVnniCpu;
  options.no_avx512 = true;
  absl::StatusOr<KernelPlan> plan = ChooseKernelPlan(options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->avx2);
  EXPECT_FALSE(plan->avx512);

  options.force_scalar = true;
  plan = ChooseKernelPlan(options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->avx2);
  EXPECT_FALSE(plan->avx512);
  EXPECT_FALSE(plan->interleaved);

  KernelPlanOptions row_major;
  row_major.features = kAvx2Cpu;
  row_major.interleaved = false;
  plan = ChooseKernelPlan(row_major);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->interleaved);
  EXPECT_EQ(plan->Describe(), "exact (f32 activations, row-major weights), avx2");

  // An override cannot add what the CPU lacks.
  KernelPlanOptions wish;
  wish.features = kScalarCpu;
  wish.interleaved = true;
  plan = ChooseKernelPlan(wish);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->interleaved);
}

TEST(ChooseKernelPlan, UnknownMatmulNamesTheAcceptedValues) {
  KernelPlanOptions options;
  options.matmul = "fast";
  absl::StatusOr<KernelPlan> plan = ChooseKernelPlan(options);
  ASSERT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("'fast'"), std::string::npos) << plan.status();
  EXPECT_NE(plan.status().message().find("auto, exact, int16 or q8"), std::string::npos)
      << plan.status();
}

TEST(MatmulKindName, RoundTripsThroughTheChooser) {
  for (MatmulKind kind : {MatmulKind::kExact, MatmulKind::kInt16, MatmulKind::kQ8}) {
    EXPECT_EQ(Choose(std::string(MatmulKindName(kind)), kVnniCpu).matmul, kind);
  }
}

TEST(DefaultKernelPlan, FollowsTheEnabledFeatures) {
  const KernelPlan widest = DefaultKernelPlan();
  EXPECT_EQ(widest.matmul, MatmulKind::kExact);
  EXPECT_EQ(widest.avx2, UseAvx2());
  EXPECT_EQ(widest.avx512, UseAvx512());
  SetForceScalar(true);
  const KernelPlan scalar = DefaultKernelPlan();
  SetForceScalar(false);
  EXPECT_FALSE(scalar.avx2);
  EXPECT_FALSE(scalar.interleaved);
}

}  // namespace
}  // namespace rill::kernels::cpu
