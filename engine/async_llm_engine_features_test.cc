// AsyncLLMEngine features over the fake executor: n > 1 samples, priority
// preemption, request status, prompt_logprobs, logit_bias, stop strings,
// mass aborts and per-request validation errors.
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <glog/logging.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "engine/async_llm_engine.h"
#include "engine/fake_model_executor.h"
#include "engine/logits_processor.h"
#include "tokenizer/tiny_test_tokenizer.h"

namespace rill::engine {
namespace {

SamplingParams Greedy(int max_tokens, OutputKind kind = OutputKind::kCumulative) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.output_kind = kind;
  return p;
}

SamplingParams Seeded(int max_tokens, uint64_t seed, int n = 1) {
  SamplingParams p = Greedy(max_tokens);
  p.temperature = 4.0f;  // The fake's logits are peaked; flatten them.
  p.seed = seed;
  p.n = n;
  return p;
}

std::vector<int32_t> MakePrompt(int n, int salt) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = 1 + (i * 5 + salt * 11) % 63;
  return v;
}

class FeaturesTest : public ::testing::Test {
 protected:
  void MakeEngine(FakeModelExecutor::Options fake = {}, EngineArgs args = {}) {
    if (args.max_num_batched_tokens == 2048) args.max_num_batched_tokens = 64;
    if (args.max_num_seqs == 64) args.max_num_seqs = 16;
    fake_options_ = fake;
    auto executor = std::make_unique<FakeModelExecutor>(fake);
    fake_ = executor.get();
    auto engine = AsyncLLMEngine::Create(args, std::move(executor), tokenizer::TinyTestTokenizer());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
  }

  std::vector<RequestOutput> Drain(RequestOutputStream* stream) {
    std::vector<RequestOutput> outs;
    while (true) {
      absl::StatusOr<RequestOutput> o = stream->Next(absl::Seconds(60));
      if (!o.ok()) {
        EXPECT_EQ(o.status().code(), absl::StatusCode::kOutOfRange) << o.status();
        break;
      }
      outs.push_back(std::move(*o));
    }
    return outs;
  }

  RequestOutput Final(const Prompt& prompt, const SamplingParams& params, const std::string& id,
                      int priority = 0) {
    auto stream = engine_->Generate(prompt, params, id, priority);
    EXPECT_TRUE(stream.ok()) << stream.status();
    if (!stream.ok()) return {};
    std::vector<RequestOutput> outs = Drain(stream->get());
    EXPECT_FALSE(outs.empty());
    return outs.empty() ? RequestOutput{} : outs.back();
  }

  void WaitIdle() {
    for (int i = 0; i < 6000 && engine_->GetNumUnfinishedRequests() > 0; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    // Stats are published after each loop pass.
    for (int i = 0; i < 500 && engine_->GetStats().kv_usage > 0.0; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

  FakeModelExecutor::Options fake_options_;
  FakeModelExecutor* fake_ = nullptr;
  std::unique_ptr<AsyncLLMEngine> engine_;
};

TEST_F(FeaturesTest, NSamplesShareThePromptBlocksAndAreReproducible) {
  EngineArgs args;
  args.enable_prefix_caching = false;  // Sharing must come from the fork alone.
  MakeEngine({}, args);
  const std::vector<int32_t> prompt = MakePrompt(17, 3);  // 4 full blocks of 4 + 1.
  const RequestOutput a = Final(prompt, Seeded(12, 42, 3), "n3");
  ASSERT_EQ(a.outputs.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a.outputs[i].index, i);
    EXPECT_EQ(a.outputs[i].token_ids.size(), 12u);
    EXPECT_EQ(a.outputs[i].finish_reason, "length");
  }
  // Samples 1 and 2 reused the 16 prompt tokens in full blocks: only the
  // first sample computed the whole prompt.
  EXPECT_EQ(a.metrics.num_cached_tokens, 16);
  const EngineStats stats = engine_->GetStats();
  EXPECT_EQ(stats.prompt_tokens, 17 + 2 * 1);
  EXPECT_NE(a.outputs[0].token_ids, a.outputs[1].token_ids);
  EXPECT_NE(a.outputs[1].token_ids, a.outputs[2].token_ids);

  // Same seed: the same samples, also among other traffic.
  std::vector<std::shared_ptr<RequestOutputStream>> noise;
  for (int i = 0; i < 4; ++i) {
    auto s = engine_->Generate(MakePrompt(9, 50 + i), Seeded(20, 1000 + i, 2), absl::StrCat("x", i));
    ASSERT_TRUE(s.ok());
    noise.push_back(*s);
  }
  const RequestOutput b = Final(prompt, Seeded(12, 42, 3), "n3-again");
  ASSERT_EQ(b.outputs.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(a.outputs[i].token_ids, b.outputs[i].token_ids) << i;
  // Sample 0 is the n = 1 request with the same seed.
  const RequestOutput one = Final(prompt, Seeded(12, 42, 1), "n1");
  EXPECT_EQ(one.outputs[0].token_ids, a.outputs[0].token_ids);
  for (auto& s : noise) Drain(s.get());
  WaitIdle();
  EXPECT_EQ(engine_->GetStats().kv_usage, 0.0);
}

TEST_F(FeaturesTest, NSamplesDeltaAndAbort) {
  FakeModelExecutor::Options o;
  o.step_delay = absl::Milliseconds(2);
  MakeEngine(o);
  SamplingParams p = Seeded(200, 5, 4);
  p.output_kind = OutputKind::kDelta;
  auto stream = engine_->Generate(MakePrompt(10, 1), p, "abort-n");
  ASSERT_TRUE(stream.ok());
  std::vector<int> seen(4, 0);
  while (true) {
    absl::StatusOr<RequestOutput> out = (*stream)->Next(absl::Seconds(60));
    ASSERT_TRUE(out.ok()) << out.status();
    for (const CompletionOutput& c : out->outputs) seen[c.index] += c.token_ids.size();
    if (seen[0] + seen[1] + seen[2] + seen[3] >= 20) break;
  }
  ASSERT_TRUE(engine_->Abort("abort-n").ok());
  std::vector<RequestOutput> rest = Drain(stream->get());
  ASSERT_FALSE(rest.empty());
  EXPECT_TRUE(rest.back().finished);
  WaitIdle();
  EXPECT_EQ(engine_->GetNumUnfinishedRequests(), 0);
  EXPECT_EQ(*engine_->GetRequestStatus("abort-n"), RequestStatus::kCancelled);
  EXPECT_EQ(engine_->GetStats().kv_usage, 0.0);
}

TEST_F(FeaturesTest, StatusIsRunningOnceScheduledBeforeAnyToken) {
  FakeModelExecutor::Options o;
  o.step_delay = absl::Milliseconds(400);
  MakeEngine(o);
  auto stream = engine_->Generate(MakePrompt(5, 2), Greedy(1), "slow");
  ASSERT_TRUE(stream.ok());
  RequestStatus st = RequestStatus::kWaiting;
  for (int i = 0; i < 20000; ++i) {
    st = *engine_->GetRequestStatus("slow");
    if (st != RequestStatus::kWaiting) break;
    absl::SleepFor(absl::Microseconds(200));
  }
  EXPECT_EQ(st, RequestStatus::kRunning);
  EXPECT_FALSE((*stream)->finished());  // The step that schedules it is still running.
  Drain(stream->get());
  EXPECT_EQ(*engine_->GetRequestStatus("slow"), RequestStatus::kCompleted);
}

TEST_F(FeaturesTest, HighPriorityPreemptsRunningLowPriorityAndOutputsStayGreedy) {
  FakeModelExecutor::Options o;
  o.step_delay = absl::Milliseconds(3);
  EngineArgs args;
  args.scheduling_policy = SchedulingPolicy::kPriority;
  args.max_num_seqs = 2;
  MakeEngine(o, args);
  struct Job {
    std::string id;
    std::vector<int32_t> prompt;
    int max_tokens;
    int priority;
    std::shared_ptr<RequestOutputStream> stream;
  };
  std::vector<Job> jobs;
  auto submit = [&](const std::string& id, int salt, int max_tokens, int priority) {
    Job j{id, MakePrompt(6 + salt % 5, salt), max_tokens, priority, nullptr};
    auto s = engine_->Generate(j.prompt, Greedy(max_tokens), id, priority);
    ASSERT_TRUE(s.ok()) << s.status();
    j.stream = *s;
    jobs.push_back(j);
  };
  submit("low-run-0", 1, 60, 10);
  submit("low-run-1", 2, 60, 10);
  for (const char* id : {"low-run-0", "low-run-1"}) {
    for (int i = 0; i < 6000 && *engine_->GetRequestStatus(id) != RequestStatus::kRunning; ++i) {
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  submit("low-queued-0", 3, 10, 10);
  submit("low-queued-1", 4, 10, 10);
  submit("high", 5, 10, 0);
  std::vector<RequestOutput> finals;
  for (Job& j : jobs) {
    std::vector<RequestOutput> outs = Drain(j.stream.get());
    ASSERT_FALSE(outs.empty());
    finals.push_back(outs.back());
    EXPECT_EQ(outs.back().outputs[0].token_ids, fake_->Generate(j.prompt, j.max_tokens)) << j.id;
  }
  const absl::Time high_first = finals[4].metrics.first_token_time;
  EXPECT_LT(high_first, finals[2].metrics.first_token_time);
  EXPECT_LT(high_first, finals[3].metrics.first_token_time);
  EXPECT_GE(engine_->GetStats().preemptions, 1);
  EXPECT_GE(finals[0].metrics.num_preemptions + finals[1].metrics.num_preemptions, 1);
}

TEST_F(FeaturesTest, PromptLogprobsMatchASeparateForward) {
  MakeEngine();
  const std::vector<int32_t> prompt = MakePrompt(13, 7);
  // Warm the prefix cache: the prompt_logprobs request must bypass it.
  Final(prompt, Greedy(2), "warm");
  SamplingParams p = Greedy(2);
  p.prompt_logprobs = 3;
  const RequestOutput out = Final(prompt, p, "plp");
  ASSERT_EQ(out.prompt_logprobs.size(), prompt.size() - 1);
  ASSERT_EQ(out.prompt_top_logprobs.size(), prompt.size() - 1);
  EXPECT_EQ(out.metrics.num_cached_tokens, 0);

  FakeModelExecutor reference(fake_options_);
  worker::ForwardBatch batch;
  worker::SequenceChunk& s = batch.sequences.emplace_back();
  s.tokens = prompt;
  s.all_logits = true;
  for (int b = 0; b < 4; ++b) s.block_table.push_back(b);
  worker::ForwardOutput fwd;
  ASSERT_TRUE(reference.Execute(batch, &fwd).ok());
  const int64_t vocab = fake_options_.vocab_size;
  for (size_t q = 1; q < prompt.size(); ++q) {
    const float* row = fwd.logits[0].data() + (q - 1) * vocab;
    EXPECT_FLOAT_EQ(out.prompt_logprobs[q - 1], TokenLogprob(row, vocab, prompt[q])) << q;
    ASSERT_EQ(out.prompt_top_logprobs[q - 1].size(), 3u);
    EXPECT_EQ(out.prompt_top_logprobs[q - 1], TopKLogprobs(row, vocab, 3)) << q;
  }
  EXPECT_EQ(out.outputs[0].token_ids, fake_->Generate(prompt, 2));
}

TEST_F(FeaturesTest, LogitBiasSteersSampling) {
  MakeEngine();
  const std::vector<int32_t> prompt = MakePrompt(7, 9);
  SamplingParams p = Greedy(6);
  p.logit_bias[17] = 100.0f;
  const RequestOutput forced = Final(prompt, p, "bias-up");
  EXPECT_EQ(forced.outputs[0].token_ids, std::vector<int32_t>(6, 17));
  const std::vector<int32_t> greedy = fake_->Generate(prompt, 1);
  SamplingParams ban = Greedy(1);
  ban.logit_bias[greedy[0]] = -100.0f;
  const RequestOutput banned = Final(prompt, ban, "bias-down");
  EXPECT_NE(banned.outputs[0].token_ids[0], greedy[0]);
}

TEST_F(FeaturesTest, StopStringsCutTheTextAndFinishTheRequest) {
  MakeEngine();
  const tokenizer::BpeTokenizer* tok = engine_->GetTokenizer();
  const std::vector<int32_t> prompt = MakePrompt(8, 4);
  const std::vector<int32_t> expected = fake_->Generate(prompt, 40);
  const std::string text = *tok->Decode(expected, true);
  ASSERT_GE(text.size(), 12u);
  const std::string stop = text.substr(6, 3);
  const size_t at = text.find(stop);

  SamplingParams p = Greedy(40);
  p.stop = {"this-never-appears", stop};
  const RequestOutput cut = Final(prompt, p, "stop");
  const CompletionOutput& c = cut.outputs[0];
  EXPECT_EQ(c.text, text.substr(0, at));
  EXPECT_EQ(c.finish_reason, "stop");
  ASSERT_TRUE(c.stop_string.has_value());
  EXPECT_EQ(*c.stop_string, stop);
  EXPECT_FALSE(c.stop_reason.has_value());
  EXPECT_LT(c.token_ids.size(), 40u);
  EXPECT_EQ(*engine_->GetRequestStatus("stop"), RequestStatus::kCompleted);

  p.include_stop_str_in_output = true;
  p.output_kind = OutputKind::kDelta;
  auto stream = engine_->Generate(prompt, p, "stop-delta");
  ASSERT_TRUE(stream.ok());
  std::string joined;
  std::vector<RequestOutput> outs = Drain(stream->get());
  for (const RequestOutput& o : outs) joined += o.outputs[0].text;
  EXPECT_EQ(joined, text.substr(0, at + stop.size()));
  EXPECT_EQ(outs.back().outputs[0].finish_reason, "stop");
  WaitIdle();
  EXPECT_EQ(engine_->GetNumUnfinishedRequests(), 0);
  EXPECT_EQ(engine_->GetStats().kv_usage, 0.0);
}

TEST_F(FeaturesTest, ThousandRandomAbortsLeakNothing) {
  FakeModelExecutor::Options o;
  o.num_blocks = 256;
  o.step_delay = absl::Microseconds(300);
  MakeEngine(o);
  constexpr int kRequests = 1000;
  std::vector<std::shared_ptr<RequestOutputStream>> streams;
  std::mt19937 rng(1234);
  for (int i = 0; i < kRequests; ++i) {
    SamplingParams p = Greedy(5 + rng() % 40);
    if (i % 7 == 0) p = Seeded(5 + rng() % 40, i, 2);
    auto s = engine_->Generate(MakePrompt(3 + rng() % 30, i), p, absl::StrCat("r", i));
    ASSERT_TRUE(s.ok()) << s.status();
    streams.push_back(*s);
    if (rng() % 3 == 0) absl::SleepFor(absl::Microseconds(rng() % 500));
    // Abort an earlier request at a random point of its life.
    const int victim = rng() % (i + 1);
    (void)engine_->Abort(absl::StrCat("r", victim));
  }
  for (int i = 0; i < kRequests; ++i) (void)engine_->Abort(absl::StrCat("r", i));
  for (auto& s : streams) {
    std::vector<RequestOutput> outs = Drain(s.get());
    ASSERT_FALSE(outs.empty());
    EXPECT_TRUE(outs.back().finished);
  }
  WaitIdle();
  EXPECT_EQ(engine_->GetNumUnfinishedRequests(), 0);
  EXPECT_EQ(engine_->GetStats().kv_usage, 0.0);
  EXPECT_EQ(engine_->GetStats().num_running + engine_->GetStats().num_waiting, 0);
}

TEST_F(FeaturesTest, EachBadParamFailsOnlyItsRequest) {
  // "good" must still run when its id is reused below (ALREADY_EXISTS): 8
  // steps of 50 ms outlast the checks, which take microseconds.
  FakeModelExecutor::Options o;
  o.step_delay = absl::Milliseconds(50);
  MakeEngine(o);
  auto good = engine_->Generate(MakePrompt(5, 1), Greedy(8), "good");
  ASSERT_TRUE(good.ok());
  auto expect = [&](SamplingParams p, absl::StatusCode code, const std::string& id = "bad",
                    const std::string& lora = "", int prompt_len = 5) {
    auto s = engine_->Generate(MakePrompt(prompt_len, 2), p, id, 0, absl::InfinitePast(), lora);
    EXPECT_EQ(s.status().code(), code) << s.status();
  };
  SamplingParams p = Greedy(4);
  p.temperature = -1.0f;
  expect(p, absl::StatusCode::kInvalidArgument);
  for (float top_p : {0.0f, 1.5f, -0.1f}) {
    p = Greedy(4);
    p.top_p = top_p;
    expect(p, absl::StatusCode::kInvalidArgument);
  }
  expect(Greedy(0), absl::StatusCode::kInvalidArgument);
  expect(Greedy(4), absl::StatusCode::kNotFound, "bad", "no-such-adapter");
  expect(Greedy(4), absl::StatusCode::kInvalidArgument, "bad", "", 300);  // > max_model_len.
  expect(Greedy(4), absl::StatusCode::kAlreadyExists, "good");
  for (int n : {0, 65}) {
    p = Greedy(4);
    p.n = n;
    expect(p, absl::StatusCode::kInvalidArgument);
  }
  p = Greedy(4);
  p.logit_bias[3] = 101.0f;
  expect(p, absl::StatusCode::kInvalidArgument);
  p = Greedy(4);
  p.logit_bias[64] = 1.0f;  // Outside the vocabulary.
  expect(p, absl::StatusCode::kInvalidArgument);
  for (int k : {-1, 21}) {
    p = Greedy(4);
    p.prompt_logprobs = k;
    expect(p, absl::StatusCode::kInvalidArgument);
  }
  p = Greedy(4);
  p.stop = {std::string(1025, 'a')};
  expect(p, absl::StatusCode::kInvalidArgument);
  p.stop = std::vector<std::string>(1025, "a");
  expect(p, absl::StatusCode::kInvalidArgument);
  std::vector<RequestOutput> outs = Drain(good->get());
  ASSERT_FALSE(outs.empty());
  EXPECT_EQ(outs.back().outputs[0].finish_reason, "length");
  EXPECT_EQ(outs.back().outputs[0].token_ids.size(), 8u);
}

}  // namespace
}  // namespace rill::engine
