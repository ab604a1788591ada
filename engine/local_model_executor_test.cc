// LocalExecutorOptions::kernel_plan (from EngineArgs::matmul) reaches the
// model: "auto" computes what "exact" does, "q8" (8-bit activations) moves the
// logits of quantized weights a little, and int16 stays within its rounding.
#include "engine/local_model_executor.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/kernel_plan.h"
#include "tests/util/tiny_models.h"

namespace rill::engine {
namespace {

class LocalModelExecutorTest : public tests::util::TinyModels<::testing::Test> {
 protected:
  // Q8_0 weights: the exact and the 8-bit-activation paths differ on them.
  static std::string Model() { return dir_ + "/llama_llama3/model.q8_0.gguf"; }

  // The last-position logits of a fixed prompt with the plan for `matmul`.
  static std::vector<float> Logits(const std::string& matmul) {
    kernels::cpu::KernelPlanOptions plan_options;
    plan_options.matmul = matmul;
    absl::StatusOr<kernels::cpu::KernelPlan> plan = kernels::cpu::ChooseKernelPlan(plan_options);
    EXPECT_TRUE(plan.ok()) << matmul << ": " << plan.status();
    if (!plan.ok()) return {};
    LocalExecutorOptions options;
    options.model_path = Model();
    options.num_blocks = 4;
    options.threads = 1;
    options.kernel_plan = *plan;
    absl::StatusOr<std::unique_ptr<LocalModelExecutor>> ex = LocalModelExecutor::Create(options);
    EXPECT_TRUE(ex.ok()) << matmul << ": " << ex.status();
    if (!ex.ok()) return {};
    worker::ForwardBatch batch;
    worker::SequenceChunk& seq = batch.sequences.emplace_back();
    seq.tokens = {10, 200, 33, 47, 120, 5, 260, 71};
    seq.block_table = {0};
    worker::ForwardOutput out;
    absl::Status s = (*ex)->Execute(batch, &out);
    EXPECT_TRUE(s.ok()) << s;
    return out.logits.empty() ? std::vector<float>{} : out.logits[0];
  }
};

TEST_F(LocalModelExecutorTest, AutoIsExactAndQ8MovesTheLogitsALittle) {
  const std::vector<float> exact = Logits("exact");
  ASSERT_FALSE(exact.empty());
  EXPECT_EQ(Logits("auto"), exact);
  const std::vector<float> q8 = Logits("q8");
  ASSERT_EQ(q8.size(), exact.size());
  float max_diff = 0.0f, max_abs = 0.0f;
  for (size_t i = 0; i < exact.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(q8[i] - exact[i]));
    max_abs = std::max(max_abs, std::abs(exact[i]));
  }
  EXPECT_GT(max_diff, 0.0f) << "q8 computed exactly what exact did";
  EXPECT_LT(max_diff, 0.05f * max_abs) << "q8 is far from exact";
}

TEST_F(LocalModelExecutorTest, Int16StaysWithinItsRoundingOfExact) {
  kernels::cpu::KernelPlanOptions int16_options;
  int16_options.matmul = "int16";
  if (!kernels::cpu::ChooseKernelPlan(int16_options).ok()) {
    GTEST_SKIP() << "no AVX-512 VNNI: the int16 kernels cannot run here";
  }
  const std::vector<float> exact = Logits("exact");
  const std::vector<float> int16 = Logits("int16");
  ASSERT_EQ(int16.size(), exact.size());
  for (size_t i = 0; i < exact.size(); ++i) EXPECT_NEAR(int16[i], exact[i], 1e-2) << i;
}

}  // namespace
}  // namespace rill::engine
