// Mixture-of-experts models tensor-parallel through real rill-worker
// processes: at tensor_parallel_size 2 each rank holds half of every
// expert's features (get_worker_info says which), and the engine gives the
// in-process TP=1 engine's greedy tokens, with log-probabilities (prompt and
// generated, top alternatives included) within the relative bound the TP
// logit checks use. Tiny random Mixtral, Qwen2-MoE (shared expert behind a
// sigmoid gate) and Qwen3-MoE, in HF and GGUF forms; three prompts run
// together so steps batch their chunks.
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/stream_drain.h"
#include "tests/util/subprocess.h"
#include "tests/util/tiny_models.h"
#include "worker/models/batch_invariance_harness.h"

namespace rill::engine {
namespace {

constexpr int kPrompts = 3;
constexpr int kPromptTokens = 20;
constexpr int kGreedyTokens = 12;

struct Completion {
  std::vector<int32_t> tokens;
  // Every log-probability the engine reported, in a fixed order: the prompt
  // tokens' and their top alternatives', then the generated tokens'.
  std::vector<float> logprobs;
};

void AppendTop(const std::vector<TopLogprobs>& tops, std::vector<float>* out) {
  for (const TopLogprobs& top : tops) {
    for (const auto& [id, logprob] : top) out->push_back(logprob);
  }
}

std::vector<Completion> RunAll(AsyncLLMEngine* engine,
                               const std::vector<std::vector<int32_t>>& prompts) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = kGreedyTokens;
  p.ignore_eos = true;
  p.logprobs = 3;
  p.prompt_logprobs = 3;
  std::vector<std::shared_ptr<RequestOutputStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    absl::StatusOr<std::shared_ptr<RequestOutputStream>> s =
        engine->Generate(prompts[i], p, absl::StrCat("r", i));
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) streams.push_back(*s);
  }
  std::vector<Completion> out(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    RequestOutput last = engine::testing::LastOutput(*streams[i], absl::Seconds(120));
    EXPECT_TRUE(last.finished && last.error.ok()) << "request " << i << ": " << last.error;
    if (last.outputs.empty()) continue;
    const CompletionOutput& c = last.outputs[0];
    out[i].tokens = c.token_ids;
    out[i].logprobs = last.prompt_logprobs;
    AppendTop(last.prompt_top_logprobs, &out[i].logprobs);
    out[i].logprobs.insert(out[i].logprobs.end(), c.logprobs.begin(), c.logprobs.end());
    AppendTop(c.top_logprobs, &out[i].logprobs);
  }
  return out;
}

class MultiprocMoeTest
    : public rill::tests::util::TinyModels<::testing::TestWithParam<std::string>> {};

TEST_P(MultiprocMoeTest, TwoWorkerRanksMatchOneRank) {
  std::cout << "tiny model seed " << seed_ << "\n";
  EngineArgs args;
  args.model = absl::StrCat(dir_, "/", GetParam());
  args.worker_binary = tests::util::RunfilePath("worker/rill-worker");
  args.kv_cache_mb = 16;
  args.max_model_len = 128;
  args.threads = 1;
  std::mt19937 rng(seed_ ^ std::hash<std::string>{}(GetParam()));
  std::uniform_int_distribution<int32_t> token(0, 298);
  std::vector<std::vector<int32_t>> prompts(kPrompts);
  for (auto& prompt : prompts) {
    for (int i = 0; i < kPromptTokens; ++i) prompt.push_back(token(rng));
  }

  std::vector<Completion> one, two;
  {
    args.tensor_parallel_size = 1;
    absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine = CreateAsyncLLMEngine(args);
    ASSERT_TRUE(engine.ok()) << engine.status();
    one = RunAll(engine->get(), prompts);
  }
  {
    args.tensor_parallel_size = 2;
    absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine = CreateAsyncLLMEngine(args);
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ((*engine)->GetEngineConfig().parallel.tensor_parallel_size, 2);
    // Each rank holds its half of every expert's features.
    absl::StatusOr<std::vector<std::string>> info = (*engine)->CollectiveRpc("get_worker_info");
    ASSERT_TRUE(info.ok()) << info.status();
    ASSERT_EQ(info->size(), 2u);
    const bool mixtral = GetParam().rfind("mixtral", 0) == 0;  // 64 features, else 32
    EXPECT_NE((*info)[0].find(mixtral ? "\"expert_ffn\":[0,32]" : "\"expert_ffn\":[0,16]"),
              std::string::npos)
        << (*info)[0];
    EXPECT_NE((*info)[1].find(mixtral ? "\"expert_ffn\":[32,64]" : "\"expert_ffn\":[16,32]"),
              std::string::npos)
        << (*info)[1];
    two = RunAll(engine->get(), prompts);
  }
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].tokens.size(), static_cast<size_t>(kGreedyTokens)) << "prompt " << i;
    EXPECT_EQ(two[i].tokens, one[i].tokens)
        << GetParam() << " prompt " << i << ": " << absl::StrJoin(prompts[i], ",");
    ASSERT_EQ(two[i].logprobs.size(), one[i].logprobs.size()) << "prompt " << i;
    ASSERT_GT(one[i].logprobs.size(), static_cast<size_t>(kPromptTokens + kGreedyTokens));
    // The row-parallel sums (attention output, experts) add in another
    // float order; the TP logit checks allow 1e-4 relative.
    const double rel = worker::RelativeL2(two[i].logprobs, one[i].logprobs);
    std::cout << GetParam() << " prompt " << i << ": logprobs relative L2 " << rel << "\n";
    EXPECT_LT(rel, 1e-4) << GetParam() << " prompt " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(TinyMoeForms, MultiprocMoeTest,
                         ::testing::Values("mixtral/hf-f32", "mixtral/model.q8_0.gguf",
                                           "qwen2_moe/hf-bf16", "qwen2_moe/model.f32.gguf",
                                           "qwen3_moe/hf-f32", "qwen3_moe/model.q8_0.gguf"),
                         rill::tests::util::TinyModelTestName);

}  // namespace
}  // namespace rill::engine
