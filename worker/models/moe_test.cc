// Mixture-of-experts models (worker/models/moe.h) on the tiny random
// Mixtral / Qwen2-MoE / Qwen3-MoE models: what the loader reads from each
// form, batch invariance with experts shared across a step's sequences, and
// the refusal of tensor parallelism. Parity with the float64 reference is in
// reference_parity_test (MoeParityTest).
#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <random>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernel_plan.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/test_seed.h"
#include "tests/util/tiny_models.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/batch_invariance_harness.h"
#include "worker/models/causal_lm.h"
#include "worker/models/flop_count.h"
#include "worker/models/tp_plan.h"

namespace rill::worker {
namespace {

using worker::loader::ModelConfig;

class MoeConfigTest : public rill::tests::util::TinyModels<::testing::Test> {
 protected:
  ModelConfig Load(const std::string& rel) {
    absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> c =
        worker::loader::LoadCheckpoint(absl::StrCat(dir_, "/", rel));
    EXPECT_TRUE(c.ok()) << rel << ": " << c.status();
    return c.ok() ? (*c)->config() : ModelConfig{};
  }
};

TEST_F(MoeConfigTest, EachFamilyIsReadFromBothForms) {
  for (const char* rel : {"mixtral/hf-f32", "mixtral/model.q8_0.gguf"}) {
    const ModelConfig m = Load(rel);
    EXPECT_EQ(m.expert_count, 4) << rel;
    EXPECT_EQ(m.expert_used_count, 2) << rel;
    EXPECT_EQ(m.expert_intermediate_size, 64) << rel;
    EXPECT_EQ(m.shared_expert_intermediate_size, 0) << rel;
    EXPECT_TRUE(m.expert_weights_norm) << rel;
    EXPECT_TRUE(m.IsMoeLayer(0) && m.IsMoeLayer(1)) << rel;
  }
  for (const char* rel : {"qwen2_moe/hf-bf16", "qwen2_moe/model.f32.gguf"}) {
    const ModelConfig m = Load(rel);
    EXPECT_EQ(m.expert_count, 4) << rel;
    EXPECT_EQ(m.expert_intermediate_size, 32) << rel;
    EXPECT_EQ(m.shared_expert_intermediate_size, 96) << rel;
    EXPECT_FALSE(m.expert_weights_norm) << rel;
    EXPECT_TRUE(m.attention_bias) << rel;
  }
  const ModelConfig dense0 = Load("qwen2_moe_dense0/hf-f32");  // mlp_only_layers: [0]
  EXPECT_FALSE(dense0.IsMoeLayer(0));
  EXPECT_TRUE(dense0.IsMoeLayer(1));
  for (const char* rel : {"qwen3_moe/hf-f32", "qwen3_moe/model.q8_0.gguf"}) {
    const ModelConfig m = Load(rel);
    EXPECT_EQ(m.expert_used_count, 2) << rel;
    EXPECT_TRUE(m.expert_weights_norm) << rel;
    EXPECT_TRUE(m.qk_norm) << rel;
    EXPECT_EQ(m.shared_expert_intermediate_size, 0) << rel;
  }
}

// FLOPs count only the experts a token runs (plus the router).
TEST_F(MoeConfigTest, FlopsCountTheExpertsUsed) {
  for (const char* rel : {"mixtral/hf-f32", "mixtral/model.f32.gguf"}) {
    absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> c =
        worker::loader::LoadCheckpoint(absl::StrCat(dir_, "/", rel));
    ASSERT_TRUE(c.ok()) << c.status();
    const ModelConfig& m = (*c)->config();
    const int64_t h = m.hidden_size, q = m.num_heads * m.head_dim, kv = m.num_kv_heads * m.head_dim;
    const int64_t per_layer = h * q + 2 * h * kv + q * h + m.expert_count * h +
                              m.expert_used_count * 3 * h * m.expert_intermediate_size;
    EXPECT_EQ(MatMulMacsPerToken(**c), m.num_layers * per_layer + m.vocab_size * h) << rel;
  }
}

TEST_F(MoeConfigTest, TensorParallelismIsRefused) {
  const ModelConfig m = Load("mixtral/hf-f32");
  absl::StatusOr<TpPartition> p = PartitionForRank(m, 0, 2);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("mixture-of-experts"), std::string::npos) << p.status();
  EXPECT_TRUE(PartitionForRank(m, 0, 1).ok());
}

// The matmul paths, as in batch_invariance_test.
enum class Path { kExact, kFast, kInt16 };

class MoeBatchInvarianceTest
    : public rill::tests::util::TinyModels<::testing::TestWithParam<std::tuple<std::string, Path>>> {};

// A sequence's logits are the same alone, in a step with 31 others whose
// tokens share its experts (bitwise), and after its context was prefilled
// in chunks.
TEST_P(MoeBatchInvarianceTest, AloneBatchedAndChunkedAgree) {
  const auto& [rel, path] = GetParam();
  kernels::cpu::KernelPlanOptions plan_options;
  plan_options.matmul = path == Path::kFast ? "q8" : path == Path::kInt16 ? "int16" : "exact";
  absl::StatusOr<kernels::cpu::KernelPlan> plan = kernels::cpu::ChooseKernelPlan(plan_options);
  if (absl::IsFailedPrecondition(plan.status())) GTEST_SKIP() << plan.status();
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
      worker::loader::LoadCheckpoint(absl::StrCat(dir_, "/", rel));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  kernels::cpu::ThreadPool pool(0);
  absl::StatusOr<std::unique_ptr<CausalLm>> model =
      CreateCausalLm(std::move(*ckpt), &pool, ModelOptions{.kernel_plan = *plan});
  ASSERT_TRUE(model.ok()) << model.status();

  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(0));
  std::cout << "tiny model seed " << seed_ << ", prompt seed " << seed << "\n";
  std::mt19937 rng(seed);
  const InvarianceRun run = RunAloneBatchedChunked(model->get(), &rng, 0, 299);
  for (size_t s = 0; s < run.alone.size(); ++s) {
    EXPECT_EQ(run.batched[s], run.alone[s])
        << "sequence " << s << " (context " << run.context[s].size() << ", new "
        << run.fresh[s].size() << ")";
    EXPECT_LE(RelativeL2(run.chunked[s], run.alone[s]), 1e-5) << "sequence " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(
    ModelsAndPaths, MoeBatchInvarianceTest,
    ::testing::Combine(::testing::Values("mixtral/model.q8_0.gguf", "qwen2_moe/hf-f32",
                                         "qwen2_moe_dense0/hf-bf16", "qwen3_moe/model.q8_0.gguf"),
                       ::testing::Values(Path::kExact, Path::kFast, Path::kInt16)),
    [](const ::testing::TestParamInfo<std::tuple<std::string, Path>>& i) {
      std::string name = std::get<0>(i.param);
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      const Path p = std::get<1>(i.param);
      return name + (p == Path::kExact ? "_Exact" : p == Path::kFast ? "_Fast" : "_Int16");
    });

}  // namespace
}  // namespace rill::worker
