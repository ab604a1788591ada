// Engine features with the real default model, where outputs matter: 64
// concurrent greedy requests equal each alone, seeded sampling (n = 1 and
// n = 3) independent of the batch, prompt_logprobs equal to the logprobs the
// decode path computed. Skips when the model is absent.

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/model_dir.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/model_path.h"
#include "engine/stream_drain.h"

namespace rill::engine {
namespace {

SamplingParams Greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

RequestOutput Wait(RequestOutputStream* stream) {
  RequestOutput last = engine::testing::LastOutput(*stream, absl::Seconds(300));
  EXPECT_TRUE(last.finished) << stream->request_id();
  return last;
}

RequestOutput RunOne(AsyncLLMEngine* engine, const Prompt& prompt, const SamplingParams& p,
                     const std::string& id) {
  auto stream = engine->Generate(prompt, p, id);
  EXPECT_TRUE(stream.ok()) << stream.status();
  return stream.ok() ? Wait(stream->get()) : RequestOutput{};
}

std::string PromptText(int i) {
  const char* topics[] = {"the ocean", "mountains", "a small robot", "coffee", "the moon",
                          "trains", "libraries", "winter", "a lost key", "bees",
                          "volcanoes", "chess", "rain", "a lighthouse", "bread", "music"};
  const char* forms[] = {"Write one sentence about ", "Tell me a fact about ",
                         "Describe ", "What do you think of "};
  return absl::StrCat(forms[(i / 16) % 4], topics[i % 16], ".");
}

class ModelFeaturesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!base::DefaultModelFileExists()) return;
    EngineArgs args;
    args.kv_cache_mb = 256;
    args.max_model_len = 512;
    args.max_num_seqs = 64;
    args.max_num_batched_tokens = 512;
    auto e = CreateAsyncLLMEngine(args);
    CHECK(e.ok()) << e.status();
    engine_ = e->release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override {
    if (engine_ == nullptr) GTEST_SKIP() << "default model not found at " << ResolveModelPath("default");
  }
  static AsyncLLMEngine* engine_;
};
AsyncLLMEngine* ModelFeaturesTest::engine_ = nullptr;

TEST_F(ModelFeaturesTest, SixtyFourConcurrentGreedyEqualEachAlone) {
  // 16 prompts alone (24 tokens); 64 concurrent requests over them with
  // random max_tokens in [8, 24], whose greedy output must be the prefix.
  constexpr int kPrompts = 16, kRequests = 64, kMax = 24;
  std::vector<std::vector<int32_t>> alone(kPrompts);
  for (int i = 0; i < kPrompts; ++i) {
    ASSERT_TRUE(engine_->ResetPrefixCache().ok());
    alone[i] = RunOne(engine_, PromptText(i), Greedy(kMax), absl::StrCat("alone", i))
                   .outputs[0].token_ids;
    ASSERT_EQ(alone[i].size(), static_cast<size_t>(kMax));
  }
  std::mt19937 rng(7);
  std::vector<int> lengths;
  std::vector<std::shared_ptr<RequestOutputStream>> streams;
  for (int i = 0; i < kRequests; ++i) {
    lengths.push_back(8 + rng() % (kMax - 8 + 1));
    auto s = engine_->Generate(PromptText(i % kPrompts), Greedy(lengths.back()),
                               absl::StrCat("batch", i));
    ASSERT_TRUE(s.ok()) << s.status();
    streams.push_back(*s);
  }
  for (int i = 0; i < kRequests; ++i) {
    const RequestOutput out = Wait(streams[i].get());
    const std::vector<int32_t> expected(alone[i % kPrompts].begin(),
                                        alone[i % kPrompts].begin() + lengths[i]);
    EXPECT_EQ(out.outputs[0].token_ids, expected) << "request " << i;
  }
  engine_->DoLogStats();
}

TEST_F(ModelFeaturesTest, SeededSamplingIsBatchInvariantAndNSamplesReproducible) {
  SamplingParams p = Greedy(12);
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.seed = 1234;
  const RequestOutput alone = RunOne(engine_, PromptText(5), p, "seeded-alone");
  SamplingParams n3 = p;
  n3.n = 3;
  const RequestOutput n3_alone = RunOne(engine_, PromptText(6), n3, "n3-alone");
  ASSERT_EQ(n3_alone.outputs.size(), 3u);

  std::vector<std::shared_ptr<RequestOutputStream>> noise;
  for (int i = 0; i < 8; ++i) {
    SamplingParams q = p;
    q.seed = 99 + i;
    auto s = engine_->Generate(PromptText(20 + i), q, absl::StrCat("noise", i));
    ASSERT_TRUE(s.ok());
    noise.push_back(*s);
  }
  auto batched = engine_->Generate(PromptText(5), p, "seeded-batched");
  auto n3_batched = engine_->Generate(PromptText(6), n3, "n3-batched");
  ASSERT_TRUE(batched.ok() && n3_batched.ok());
  EXPECT_EQ(Wait(batched->get()).outputs[0].token_ids, alone.outputs[0].token_ids);
  const RequestOutput n3_again = Wait(n3_batched->get());
  ASSERT_EQ(n3_again.outputs.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(n3_again.outputs[i].token_ids, n3_alone.outputs[i].token_ids) << i;
  }
  for (auto& s : noise) Wait(s.get());
}

TEST_F(ModelFeaturesTest, PromptLogprobsEqualTheDecodeLogprobs) {
  // The logprobs the decode path gave 4 greedy tokens must come back as the
  // prompt logprobs of those positions when prompt + tokens is one prefill.
  const tokenizer::BpeTokenizer* tok = engine_->GetTokenizer();
  std::vector<int32_t> prompt = tok->Encode(PromptText(9), /*add_special_tokens=*/true);
  const RequestOutput gen = RunOne(engine_, prompt, Greedy(4), "plp-gen");
  ASSERT_EQ(gen.outputs[0].logprobs.size(), 4u);
  const size_t base = prompt.size();
  std::vector<int32_t> extended = prompt;
  extended.insert(extended.end(), gen.outputs[0].token_ids.begin(), gen.outputs[0].token_ids.end());
  SamplingParams p = Greedy(1);
  p.prompt_logprobs = 2;
  const RequestOutput out = RunOne(engine_, extended, p, "plp");
  ASSERT_EQ(out.prompt_logprobs.size(), extended.size() - 1);
  EXPECT_EQ(out.metrics.num_cached_tokens, 0);
  for (size_t k = 0; k < 4; ++k) {
    // prompt_logprobs[q - 1] is for position q.
    EXPECT_NEAR(out.prompt_logprobs[base + k - 1], gen.outputs[0].logprobs[k], 2e-2) << k;
    ASSERT_EQ(out.prompt_top_logprobs[base + k - 1].size(), 2u);
    EXPECT_EQ(out.prompt_top_logprobs[base + k - 1][0].first, gen.outputs[0].token_ids[k]) << k;
  }
  for (float lp : out.prompt_logprobs) EXPECT_LE(lp, 1e-4f);
}

}  // namespace
}  // namespace rill::engine
