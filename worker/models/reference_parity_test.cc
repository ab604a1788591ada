// The C++ forward pass against the independent numpy reference
// (tests/reference/): tiny random models in every HF and GGUF form, fresh
// weights each run, and the real default model.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/kernel_plan.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"
#include "tests/util/test_seed.h"
#include "tests/util/tiny_models.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/causal_lm.h"

namespace rill::worker {
namespace {

using rill::tests::util::RunPython;
using rill::tests::util::TestTempDir;

constexpr char kReference[] = "tests/reference/reference_model.py";
constexpr char kCompare[] = "tests/reference/compare_logits.py";
// Relative L2 error of the default model's logits per position.
constexpr double kDefaultModelThreshold = 1e-3;

// Writes [n][vocab] logits in the reference's raw format (+ .json sidecar).
void WriteLogits(const std::string& path, const std::vector<float>& logits, int64_t vocab,
                 const std::vector<int32_t>& greedy) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(logits.data()), logits.size() * sizeof(float));
  std::ofstream(path + ".json") << "{\"shape\": [" << logits.size() / vocab << ", " << vocab
                                << "], \"dtype\": \"float32\", \"greedy\": ["
                                << absl::StrJoin(greedy, ", ") << "]}";
}

struct Run {
  std::vector<float> logits;    // every prompt position
  std::vector<int32_t> greedy;  // continuation
};

// Prefill in one chunk (all logits), then greedy decode `steps` tokens.
Run RunModel(CausalLm* model, const std::vector<int32_t>& prompt, int steps) {
  const int block_size = 16;
  const int blocks = (prompt.size() + steps + block_size) / block_size + 1;
  absl::StatusOr<PagedKvCache> cache = PagedKvCache::Create(model->CacheShape(blocks, block_size));
  EXPECT_TRUE(cache.ok());
  ForwardBatch batch;
  batch.sequences.resize(1);
  SequenceChunk& seq = batch.sequences[0];
  for (int i = 0; i < blocks; ++i) seq.block_table.push_back(blocks - 1 - i);  // not identity
  seq.tokens = prompt;
  seq.all_logits = true;
  Run run;
  ForwardOutput out;
  const int64_t vocab = model->config().vocab_size;
  for (int s = 0; s <= steps; ++s) {
    absl::Status st = model->Forward(batch, &*cache, &out);
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok()) return run;
    if (s == 0) run.logits = out.logits[0];
    if (s == steps) break;
    const float* last = out.logits[0].data() + out.logits[0].size() - vocab;
    int32_t next = static_cast<int32_t>(std::max_element(last, last + vocab) - last);
    run.greedy.push_back(next);
    seq.start_pos += seq.tokens.size();
    seq.tokens = {next};
    seq.all_logits = false;
  }
  return run;
}

// The 8-bit activation path (matmul q8) on this CPU.
ModelOptions Q8MatmulOptions() {
  kernels::cpu::KernelPlanOptions q8;
  q8.matmul = "q8";
  absl::StatusOr<kernels::cpu::KernelPlan> plan = kernels::cpu::ChooseKernelPlan(q8);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return ModelOptions{.kernel_plan = plan.value_or(kernels::cpu::DefaultKernelPlan())};
}

// Runs our model and the reference on `path`; returns compare_logits' output
// and sets *passed.
std::string CompareWithReference(const std::string& path, const std::vector<int32_t>& prompt,
                                 int steps, double threshold, bool* passed,
                                 ModelOptions options = {}) {
  *passed = false;
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
      worker::loader::LoadCheckpoint(path);
  if (!ckpt.ok()) return absl::StrCat("load failed: ", ckpt.status().ToString());
  kernels::cpu::ThreadPool pool(0);
  absl::StatusOr<std::unique_ptr<CausalLm>> model = CreateCausalLm(
      std::shared_ptr<const worker::loader::Checkpoint>(std::move(*ckpt)), &pool, options);
  if (!model.ok()) return absl::StrCat("model failed: ", model.status().ToString());
  Run ours = RunModel(model->get(), prompt, steps);
  static int counter = 0;
  const std::string base = absl::StrCat(TestTempDir(), "/cmp", counter++);
  WriteLogits(base + ".ours.bin", ours.logits, (*model)->config().vocab_size, ours.greedy);
  absl::StatusOr<rill::tests::util::CommandResult> ref =
      RunPython(kReference, {"--model", path, "--tokens", absl::StrJoin(prompt, ","), "--greedy",
                             absl::StrCat(steps), "--out", base + ".ref.npy"});
  if (!ref.ok()) return ref.status().ToString();
  if (ref->exit_code != 0) return absl::StrCat("reference failed:\n", ref->output);
  absl::StatusOr<rill::tests::util::CommandResult> cmp = RunPython(
      kCompare,
      {base + ".ours.bin", base + ".ref.npy", "--threshold", absl::StrCat(threshold), "--quiet"});
  if (!cmp.ok()) return cmp.status().ToString();
  *passed = cmp->exit_code == 0;
  return cmp->output;
}

std::vector<int32_t> RandomPrompt(std::mt19937* rng, int n, int vocab) {
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> p(n);
  for (int32_t& t : p) t = dist(*rng);
  return p;
}

class TinyModelParityTest
    : public rill::tests::util::TinyModels<::testing::TestWithParam<std::string>> {
 protected:
  // Every form, quantized ones included, must match to 1e-3 with the exact
  // matmul path: the logits of each of `prompt_len` positions and `steps`
  // greedy tokens.
  void ExpectParity(int prompt_len, int steps) {
    std::cout << "tiny model seed " << seed_ << "\n";
    const std::string rel = GetParam();
    std::mt19937 rng(seed_ ^ std::hash<std::string>{}(rel));
    std::vector<int32_t> prompt = RandomPrompt(&rng, prompt_len, 300);
    bool passed = false;
    std::string report =
        CompareWithReference(absl::StrCat(dir_, "/", rel), prompt, steps, 1e-3, &passed);
    EXPECT_TRUE(passed) << rel << ":\n" << report;
    std::cout << rel << ": " << report;  // the worst position's figures
  }
};

TEST_P(TinyModelParityTest, LogitsAndGreedyMatchReference) {
  ExpectParity(24, 16);
  const std::string rel = GetParam();
  std::mt19937 rng(seed_ ^ std::hash<std::string>{}(rel));
  std::vector<int32_t> prompt = RandomPrompt(&rng, 24, 300);
  bool passed = false;
  std::string report;
  // The fast path (8-bit activations) only within its quantization error.
  const bool quantized = rel.find("q8_0") != std::string::npos ||
                         rel.find("q4_1") != std::string::npos;
  if (quantized) {
    report = CompareWithReference(absl::StrCat(dir_, "/", rel), prompt, 0, 3e-2, &passed,
                                  Q8MatmulOptions());
    EXPECT_TRUE(passed) << rel << " (fast matmul):\n" << report;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllForms, TinyModelParityTest,
    ::testing::Values(
        "llama_gqa/hf-f32", "llama_gqa/hf-f16", "llama_gqa/hf-bf16", "llama_gqa/hf-f32-sharded",
        "llama_gqa/model.f32.gguf", "llama_gqa/model.f16.gguf", "llama_gqa/model.q8_0.gguf",
        "llama_gqa/model.q4_1.gguf", "llama_llama3/hf-f32", "llama_llama3/model.f32.gguf",
        "llama_linear/hf-f32", "llama_linear/model.f32.gguf", "qwen2_bias/hf-f32",
        "qwen2_bias/model.f32.gguf",
        // Sliding windows shorter than the prompt (8 of 24 + 16
        // positions; Qwen2's on its second layer only), and a
        // transformers 5 config (rope_parameters, no rope_theta).
        "mistral_window/hf-f32", "mistral_window/hf-bf16", "mistral_window/model.f32.gguf",
        "mistral_window/model.q8_0.gguf", "qwen2_window/hf-f32", "llama_tf5/hf-f32",
        "llama_tf5/hf-bf16", "llama_tf5/model.f32.gguf",
        // Qwen3: per-head q/k norms, head_dim 24 != hidden / heads.
        "qwen3/hf-f32", "qwen3/hf-bf16", "qwen3/model.f32.gguf", "qwen3/model.q8_0.gguf",
        // Gemma 2: (1 + w) norms, post norms, GeGLU, soft-caps,
        // alternating window; query_pre_attn_scalar != head_dim.
        "gemma2/hf-f32", "gemma2/hf-bf16", "gemma2/model.f32.gguf", "gemma2/model.q8_0.gguf",
        "gemma2_scalar/hf-f32", "gpt2/hf-f32", "gpt2/hf-bf16", "gpt2/model.f32.gguf",
        "gpt2/model.q8_0.gguf"),
    rill::tests::util::TinyModelTestName);

// Mixture of experts (Mixtral, also in transformers 5's fused layout;
// Qwen2-MoE with its shared expert, and with a dense layer from
// mlp_only_layers; Qwen3-MoE): 64-token prompts and 64 greedy
// tokens on the exact path, in HF and GGUF forms (q8_0 included: the
// reference dequantizes the same blocks).
class MoeParityTest : public rill::tests::util::TinyModels<::testing::TestWithParam<std::string>> {};

TEST_P(MoeParityTest, LogitsAndGreedyMatchReference) {
  std::cout << "tiny model seed " << seed_ << "\n";
  const std::string rel = GetParam();
  std::mt19937 rng(seed_ ^ std::hash<std::string>{}(rel));
  std::vector<int32_t> prompt = RandomPrompt(&rng, 64, 300);
  bool passed = false;
  std::string report =
      CompareWithReference(absl::StrCat(dir_, "/", rel), prompt, 64, 1e-3, &passed);
  EXPECT_TRUE(passed) << rel << ":\n" << report;
  std::cout << rel << ": " << report << "\n";
}

INSTANTIATE_TEST_SUITE_P(
    MoeForms, MoeParityTest,
    ::testing::Values("mixtral/hf-f32", "mixtral/hf-bf16", "mixtral/model.f32.gguf",
                      "mixtral/model.f16.gguf", "mixtral/model.q8_0.gguf",
                      // transformers 5's layout: fused experts, rope_parameters.
                      "mixtral_tf5/hf-f32", "mixtral_tf5/hf-bf16", "qwen2_moe/hf-f32",
                      "qwen2_moe/hf-bf16", "qwen2_moe/model.f32.gguf",
                      "qwen2_moe/model.q8_0.gguf", "qwen2_moe_dense0/hf-f32",
                      "qwen3_moe/hf-f32", "qwen3_moe/hf-bf16", "qwen3_moe/model.f32.gguf",
                      "qwen3_moe/model.q8_0.gguf"),
    rill::tests::util::TinyModelTestName);

// The families added for issue 32, over 64 prompt positions and a 64-token
// greedy continuation (128 positions: the windows of 8 are far shorter).
class NewFamilyParityTest : public TinyModelParityTest {};

TEST_P(NewFamilyParityTest, SixtyFourPositionsAndTokensMatchReference) { ExpectParity(64, 64); }

INSTANTIATE_TEST_SUITE_P(
    AllForms, NewFamilyParityTest,
    ::testing::Values(
        // Gemma 3: (1 + w) q/k norms, five sliding layers then a global one,
        // dual RoPE bases (global one linearly scaled), untied head.
        "gemma3/hf-f32", "gemma3/hf-bf16", "gemma3/model.f32.gguf", "gemma3/model.q8_0.gguf",
        "gemma3/model.q4_1.gguf",
        // transformers 5 form: layer_types, per-layer-type rope_parameters,
        // query_pre_attn_scalar != head_dim, a final soft-cap.
        "gemma3_tf5/hf-f32",
        // The multimodal wrapper: text_config with class defaults, nested names.
        "gemma3_mm/hf-f32",
        // Every third layer global: HF's sliding_window_pattern 3; GGUF's
        // attention.sliding_window_pattern as one bool per layer (f32,
        // q8_0) and as the period (f16).
        "gemma3_pattern/hf-f32", "gemma3_pattern/model.f32.gguf",
        "gemma3_pattern/model.f16.gguf", "gemma3_pattern/model.q8_0.gguf",
        // Phi-3: fused qkv / gate_up split at load, a window of 8 (every layer).
        "phi3/hf-f32", "phi3/hf-bf16", "phi3/model.f32.gguf", "phi3/model.q8_0.gguf",
        // LongRoPE (long factors, attention factor), 12 of 16 dims rotated, GQA.
        "phi3_longrope/hf-f32", "phi3_longrope/model.f32.gguf",
        "phi3_longrope/model.q4_1.gguf"),
    rill::tests::util::TinyModelTestName);

}  // namespace
}  // namespace rill::worker

namespace rill::worker {
namespace {

// The real default model (Q4_1 weights): logits over a 64-token prompt and a
// 64-token greedy continuation, on several prompts.
TEST(DefaultModelParityTest, LogitsAndGreedyMatchReference) {
  const std::string path = rill::tests::util::DefaultModelPath();
  if (access(path.c_str(), R_OK) != 0) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(0));
  std::cout << "prompt seed " << seed << "\n";
  std::mt19937 rng(seed);
  // Random ids from the ordinary part of the vocabulary and one fixed text prompt
  // ("The capital of France is" in SmolLM2's tokenizer) padded with more text ids.
  std::vector<std::vector<int32_t>> prompts;
  prompts.push_back({504, 3575, 282, 4649, 314});
  for (int i = 0; i < 4; ++i) {
    std::uniform_int_distribution<int32_t> dist(200, 49000);
    std::vector<int32_t> p(64);
    for (int32_t& t : p) t = dist(rng);
    prompts.push_back(p);
  }
  for (const std::vector<int32_t>& prompt : prompts) {
    bool passed = false;
    std::string report = CompareWithReference(path, prompt, 64, kDefaultModelThreshold, &passed);
    EXPECT_TRUE(passed) << "prompt " << absl::StrJoin(prompt, ",") << ":\n" << report;
  }
}

}  // namespace
}  // namespace rill::worker

namespace rill::worker {
namespace {

constexpr char kKQuantModels[] = "tests/reference/kquant_models.py";

// The exact plan with the interleaved weights (this CPU's default) and
// without them (K-quants then take the dequantize-then-dot fallback), and
// the int16 plan where the CPU runs it.
std::vector<std::pair<std::string, ModelOptions>> KQuantPlans() {
  std::vector<std::pair<std::string, ModelOptions>> plans = {{"default", ModelOptions{}}};
  kernels::cpu::KernelPlanOptions row_major;
  row_major.interleaved = false;
  absl::StatusOr<kernels::cpu::KernelPlan> plan = kernels::cpu::ChooseKernelPlan(row_major);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (plan.ok()) plans.push_back({"not interleaved", ModelOptions{.kernel_plan = *plan}});
  // matmul=int16 has no K-quant kernels: its K-quant matrices run exact's
  // interleaved kernels (where the CPU has AVX-512 VNNI; refused elsewhere).
  kernels::cpu::KernelPlanOptions int16;
  int16.matmul = "int16";
  absl::StatusOr<kernels::cpu::KernelPlan> int16_plan = kernels::cpu::ChooseKernelPlan(int16);
  if (int16_plan.ok()) plans.push_back({"int16", ModelOptions{.kernel_plan = *int16_plan}});
  return plans;
}

// A tiny random Llama whose matrices are Q2_K, Q4_K, Q5_K and Q6_K (every
// type across its layers' kinds of matrix), fresh weights each run.
TEST(KQuantParityTest, TinyMixedKModelMatchesReference) {
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(0));
  std::cout << "tiny K-quant model seed " << seed << "\n";
  const std::string dir = absl::StrCat(TestTempDir(), "/kquant_tiny");
  absl::StatusOr<rill::tests::util::CommandResult> made =
      RunPython(kKQuantModels, {"tiny", dir, "--seed", absl::StrCat(seed % 100000)});
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->exit_code, 0) << made->output;
  std::mt19937 rng(seed);
  const std::vector<int32_t> prompt = RandomPrompt(&rng, 24, 300);
  for (const auto& [name, options] : KQuantPlans()) {
    bool passed = false;
    const std::string report = CompareWithReference(absl::StrCat(dir, "/model.mixed_k.gguf"),
                                                    prompt, 16, 1e-3, &passed, options);
    EXPECT_TRUE(passed) << name << ":\n" << report;
  }
}

// The default model re-quantized as llama.cpp's Q4_K_M (Q4_K, Q6_K, and Q5_0
// / Q8_0 for its 576-wide rows): 64-token logits and a 64-token greedy
// continuation against the reference reading the same file.
TEST(KQuantParityTest, DefaultModelAsQ4KMMatchesReference) {
  const std::string src = rill::tests::util::DefaultModelPath();
  if (access(src.c_str(), R_OK) != 0) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  const std::string path = absl::StrCat(TestTempDir(), "/default.q4_k_m.gguf");
  absl::StatusOr<rill::tests::util::CommandResult> made =
      RunPython(kKQuantModels, {"requantize", src, path, "--scheme", "q4_k_m"});
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->exit_code, 0) << made->output;
  EXPECT_NE(made->output.find("Q4_K"), std::string::npos) << made->output;
  EXPECT_NE(made->output.find("Q6_K"), std::string::npos) << made->output;
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(1));
  std::cout << "prompt seed " << seed << "\n";
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(200, 49000);
  std::vector<int32_t> prompt(64);
  for (int32_t& t : prompt) t = dist(rng);
  bool passed = false;
  const std::string report =
      CompareWithReference(path, prompt, 64, kDefaultModelThreshold, &passed);
  EXPECT_TRUE(passed) << "prompt " << absl::StrJoin(prompt, ",") << ":\n" << report;
}

}  // namespace
}  // namespace rill::worker
