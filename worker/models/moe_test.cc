// Mixture-of-experts models (worker/models/moe.h) on the tiny random
// Mixtral / Qwen2-MoE / Qwen3-MoE models: what the loader reads from each
// form, batch invariance with experts shared across a step's sequences, and
// how tensor parallelism partitions the experts. Parity with the float64
// reference is in reference_parity_test (MoeParityTest), TP=2 against TP=1
// in tensor_parallel_test and engine/multiproc_moe_test.
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

// Tensor parallelism splits every expert's features (and the shared
// expert's) like the dense MLP's; a model without dense layers splits no
// dense size. Parity of the sharded forward is in tensor_parallel_test.
TEST_F(MoeConfigTest, TensorParallelPartitionSplitsEveryExpert) {
  const ModelConfig mixtral = Load("mixtral/hf-f32");
  absl::StatusOr<TpPartition> m0 = PartitionForRank(mixtral, 0, 2),
                              m1 = PartitionForRank(mixtral, 1, 2);
  ASSERT_TRUE(m0.ok() && m1.ok()) << m0.status() << " " << m1.status();
  // 64 features: two 32-feature blocks.
  EXPECT_EQ(m0->expert_ffn_begin, 0);
  EXPECT_EQ(m0->expert_ffn_end, 32);
  EXPECT_EQ(m1->expert_ffn_begin, 32);
  EXPECT_EQ(m1->expert_ffn_end, 64);
  EXPECT_EQ(m0->ffn_size(), 0);  // no dense layer
  EXPECT_EQ(m1->shared_expert_ffn_end, 0);

  const ModelConfig qwen2 = Load("qwen2_moe/model.f32.gguf");
  absl::StatusOr<TpPartition> q0 = PartitionForRank(qwen2, 0, 2),
                              q1 = PartitionForRank(qwen2, 1, 2);
  ASSERT_TRUE(q0.ok() && q1.ok()) << q0.status() << " " << q1.status();
  // 32 features are one block: split at 16.
  EXPECT_EQ(q0->expert_ffn_end, 16);
  EXPECT_EQ(q1->expert_ffn_begin, 16);
  EXPECT_EQ(q1->expert_ffn_end, 32);
  // The shared expert's 96 = three blocks: 2 + 1.
  EXPECT_EQ(q0->shared_expert_ffn_begin, 0);
  EXPECT_EQ(q0->shared_expert_ffn_end, 64);
  EXPECT_EQ(q1->shared_expert_ffn_begin, 64);
  EXPECT_EQ(q1->shared_expert_ffn_end, 96);

  // mlp_only_layers: [0] keeps its dense MLP, which is split too.
  const ModelConfig dense0 = Load("qwen2_moe_dense0/hf-f32");
  absl::StatusOr<TpPartition> d1 = PartitionForRank(dense0, 1, 2);
  ASSERT_TRUE(d1.ok()) << d1.status();
  EXPECT_EQ(d1->ffn_begin, dense0.intermediate_size / 2);
  EXPECT_EQ(d1->ffn_end, dense0.intermediate_size);
  EXPECT_EQ(d1->expert_ffn_begin, 16);

  // One rank holds everything.
  absl::StatusOr<TpPartition> whole = PartitionForRank(qwen2, 0, 1);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->expert_ffn_end, qwen2.expert_intermediate_size);
  EXPECT_EQ(whole->shared_expert_ffn_end, qwen2.shared_expert_intermediate_size);
}

// A size with fewer features than ranks is a load error naming it.
TEST(MoePartitionTest, UnsplittableExpertSizesAreClearErrors) {
  ModelConfig c;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.num_layers = 2;
  c.intermediate_size = 4096;
  c.expert_count = 8;
  c.expert_used_count = 2;
  c.expert_intermediate_size = 3;
  absl::StatusOr<TpPartition> p = PartitionForRank(c, 0, 4);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
  EXPECT_NE(p.status().message().find("expert intermediate size 3 cannot be split over 4 ranks"),
            std::string::npos)
      << p.status();
  EXPECT_TRUE(PartitionForRank(c, 2, 3).ok());  // 3 features, 3 ranks: one each

  c.expert_intermediate_size = 64;
  c.shared_expert_intermediate_size = 2;
  p = PartitionForRank(c, 3, 4);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("shared expert intermediate size 2"), std::string::npos)
      << p.status();

  // A pure mixture-of-experts model never splits its (unused) dense size.
  c.shared_expert_intermediate_size = 0;
  c.intermediate_size = 1;
  EXPECT_TRUE(PartitionForRank(c, 3, 4).ok());
  c.moe_layers = {false, true};  // layer 0 dense: now it must split
  p = PartitionForRank(c, 3, 4);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("intermediate size 1 cannot"), std::string::npos)
      << p.status();
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
