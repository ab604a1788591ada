// Structured outputs in the in-process engine with the real default model:
// every sample of n > 1 matches its constraint under chunked prefill,
// prefix-cache hits and preemption by recompute; constrained greedy output
// does not change when its sequence is preempted; logit_bias still applies
// among the tokens a grammar allows; limits and a missing vocabulary are
// refused at once. Skips when the model is absent.

#include <glog/logging.h>
#include <gtest/gtest.h>
#include <re2/re2.h>

#include <memory>
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

using structured_output::Constraint;
using structured_output::ConstraintKind;

// A long local part, so each sample needs KV blocks of its own past the prompt.
constexpr char kEmail[] = "[a-z]{30,40}@[a-z]{2,8}\\.(com|org)";
// Longer than max_num_batched_tokens below, so its prefill is chunked.
constexpr char kPrompt[] =
    "You are a helpful assistant that writes contact details for a small company directory. "
    "Each entry has one e-mail address in lower case. Write the e-mail address of the "
    "person who runs the bakery on the corner of the main street: ";

std::unique_ptr<AsyncLLMEngine> MakeEngine(int num_kv_blocks,
                                           absl::Duration compile_timeout = absl::Seconds(10)) {
  EngineArgs args;
  args.structured_output_compile_timeout = compile_timeout;
  args.max_model_len = 256;
  args.max_num_seqs = 8;
  args.max_num_batched_tokens = 32;  // Chunked prefill.
  args.num_kv_blocks = num_kv_blocks;
  auto e = CreateAsyncLLMEngine(args);
  CHECK(e.ok()) << e.status();
  return std::move(*e);
}

RequestOutput RunRequest(AsyncLLMEngine* e, const SamplingParams& p, const std::string& id,
                  const std::string& prompt = kPrompt) {
  auto stream = e->Generate(prompt, p, id);
  EXPECT_TRUE(stream.ok()) << stream.status();
  if (!stream.ok()) return {};
  RequestOutput last = engine::testing::LastOutput(**stream, absl::Seconds(300));
  return last;
}

SamplingParams EmailParams(int n, float temperature) {
  SamplingParams p;
  p.n = n;
  p.temperature = temperature;
  p.seed = 5;
  p.max_tokens = 64;
  p.output_kind = OutputKind::kFinalOnly;
  p.constraint = {ConstraintKind::kRegex, kEmail, {}};
  return p;
}

class StructuredOutputEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!base::DefaultModelFileExists())
      GTEST_SKIP() << "default model not found at " << ResolveModelPath("default");
  }
};

TEST_F(StructuredOutputEngineTest, SamplesMatchUnderChunkingPrefixCacheAndPreemption) {
  // 8 blocks of 16: the prompt (~60 tokens) fills 3, each sample needs 1-3
  // more of its own, so 4 samples cannot all run at once and preempt.
  std::unique_ptr<AsyncLLMEngine> e = MakeEngine(8);
  int preemptions = 0;
  for (int round = 0; round < 2; ++round) {  // The second round hits the prefix cache.
    const RequestOutput out = RunRequest(e.get(), EmailParams(4, 1.0f), absl::StrCat("email", round));
    ASSERT_TRUE(out.error.ok()) << out.error;
    ASSERT_EQ(out.outputs.size(), 4u);
    for (const CompletionOutput& c : out.outputs) {
      EXPECT_TRUE(RE2::FullMatch(c.text, kEmail)) << "sample " << c.index << ": " << c.text;
      EXPECT_EQ(c.finish_reason, "stop") << c.text;
    }
    if (round == 1) {
      EXPECT_GT(out.metrics.num_cached_tokens, 0);
    }
    preemptions += out.metrics.num_preemptions;
  }
  EXPECT_GT(preemptions, 0) << "the cache was meant to be too small";
}

TEST_F(StructuredOutputEngineTest, ConstrainedGreedyIsTheSameWhenPreempted) {
  std::unique_ptr<AsyncLLMEngine> roomy = MakeEngine(0);
  const RequestOutput alone = RunRequest(roomy.get(), EmailParams(1, 0.0f), "alone");
  ASSERT_TRUE(alone.error.ok()) << alone.error;
  ASSERT_TRUE(RE2::FullMatch(alone.outputs[0].text, kEmail)) << alone.outputs[0].text;
  // Greedy samples are identical, so all four must equal the lone one,
  // whichever of them is preempted and recomputed on the way.
  std::unique_ptr<AsyncLLMEngine> tight = MakeEngine(8);
  const RequestOutput four = RunRequest(tight.get(), EmailParams(4, 0.0f), "four");
  LOG(INFO) << alone.prompt_token_ids.size() << " prompt tokens; greedy: " << alone.outputs[0].text
            << " (" << alone.outputs[0].token_ids.size() << " tokens)";
  ASSERT_TRUE(four.error.ok()) << four.error;
  ASSERT_EQ(four.outputs.size(), 4u);
  for (const CompletionOutput& c : four.outputs) {
    EXPECT_EQ(c.token_ids, alone.outputs[0].token_ids) << c.text << " vs " << alone.outputs[0].text;
  }
  EXPECT_GT(four.metrics.num_preemptions, 0) << "the cache was meant to be too small";
}

TEST_F(StructuredOutputEngineTest, LogitBiasStillChoosesAmongAllowedTokens) {
  std::unique_ptr<AsyncLLMEngine> e = MakeEngine(0);
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 8;
  p.output_kind = OutputKind::kFinalOnly;
  p.constraint = {ConstraintKind::kChoice, "", {"Paris", "Rome"}};
  const RequestOutput plain = RunRequest(e.get(), p, "plain", "The capital of France is");
  ASSERT_TRUE(plain.error.ok()) << plain.error;
  EXPECT_EQ(plain.outputs[0].text, "Paris");
  const std::vector<int32_t> rome = e->GetTokenizer()->Encode("Rome", false);
  ASSERT_FALSE(rome.empty());
  p.logit_bias[rome[0]] = 100.0f;
  const RequestOutput biased = RunRequest(e.get(), p, "biased", "The capital of France is");
  ASSERT_TRUE(biased.error.ok()) << biased.error;
  EXPECT_EQ(biased.outputs[0].text, "Rome");
  // ignore_eos: past the grammar's end only EOS stays allowed, to max_tokens.
  p.logit_bias.clear();
  p.ignore_eos = true;
  const RequestOutput on = RunRequest(e.get(), p, "ignore-eos", "The capital of France is");
  ASSERT_TRUE(on.error.ok()) << on.error;
  EXPECT_EQ(on.outputs[0].finish_reason, "length");
  EXPECT_EQ(on.outputs[0].token_ids.size(), 8u);
  EXPECT_EQ(on.outputs[0].text, "Paris");
  // min_tokens past the grammar's end: EOS fills up to it, no error.
  p.ignore_eos = false;
  p.min_tokens = 4;
  const RequestOutput min = RunRequest(e.get(), p, "min-tokens", "The capital of France is");
  ASSERT_TRUE(min.error.ok()) << min.error;
  EXPECT_EQ(min.outputs[0].text, "Paris");
  EXPECT_EQ(min.outputs[0].finish_reason, "stop");
}

TEST_F(StructuredOutputEngineTest, LimitsAreRefusedAtOnceAndCompileErrorsEndTheRequest) {
  std::unique_ptr<AsyncLLMEngine> e = MakeEngine(0);
  SamplingParams p;
  p.constraint = {ConstraintKind::kJsonSchema, std::string(40, '[') + std::string(40, ']'), {}};
  auto deep = e->Generate("x", p, "deep");
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(deep.status().message().find("structured_output_max_json_depth"), std::string::npos)
      << deep.status();
  p.constraint = {ConstraintKind::kChoice, "", {}};
  EXPECT_EQ(e->Generate("x", p, "empty").status().code(), absl::StatusCode::kInvalidArgument);
  p.constraint = {ConstraintKind::kRegex, "(unclosed", {}};
  const RequestOutput bad = RunRequest(e.get(), p, "bad-regex", "x");
  EXPECT_EQ(bad.error.code(), absl::StatusCode::kInvalidArgument) << bad.error;
  EXPECT_NE(bad.error.message().find("regex"), std::string::npos) << bad.error;
}

TEST_F(StructuredOutputEngineTest, CompileTimeoutAndAbortWhileCompilingEndOnlyThatRequest) {
  std::unique_ptr<AsyncLLMEngine> e = MakeEngine(0, absl::Milliseconds(1));
  // Thousands of choices take far longer than 1 ms to compile.
  auto heavy = [](const std::string& tag) {
    SamplingParams p;
    p.output_kind = OutputKind::kFinalOnly;
    p.constraint.kind = ConstraintKind::kChoice;
    for (int i = 0; i < 4000; ++i) p.constraint.choices.push_back(absl::StrCat(tag, i));
    return p;
  };
  auto slow = e->Generate("x", heavy("timeout"), "slow");
  ASSERT_TRUE(slow.ok()) << slow.status();
  SamplingParams free;
  free.temperature = 0.0f;
  free.max_tokens = 4;
  free.ignore_eos = true;
  const RequestOutput other = RunRequest(e.get(), free, "free", "Hello");
  EXPECT_TRUE(other.error.ok()) << other.error;
  EXPECT_EQ(other.outputs[0].token_ids.size(), 4u);
  RequestOutput last = engine::testing::LastOutput(**slow, absl::Seconds(60));
  EXPECT_EQ(last.error.code(), absl::StatusCode::kInvalidArgument) << last.error;
  EXPECT_NE(last.error.message().find("structured_output_compile_timeout"), std::string::npos)
      << last.error;

  // Aborted while it waits for its grammar: it ends as "abort", nothing else.
  auto aborted = e->Generate("x", heavy("abort"), "aborted");
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  ASSERT_TRUE(e->Abort("aborted").ok());
  while (true) {
    absl::StatusOr<RequestOutput> o = (*aborted)->Next(absl::Seconds(60));
    if (!o.ok()) break;
    last = std::move(*o);
  }
  EXPECT_EQ(last.outputs[0].finish_reason, "abort") << last.error;
  EXPECT_TRUE(last.outputs[0].token_ids.empty());
}

}  // namespace
}  // namespace rill::engine
