// AsyncLLMEngine end to end over the fake executor and a tiny tokenizer.
#include "engine/async_llm_engine.h"

#include <atomic>
#include <fstream>
#include <sstream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <glog/logging.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "engine/fake_model_executor.h"
#include "tokenizer/tiny_test_tokenizer.h"

namespace rill::engine {
namespace {

// Vocabulary: 0 = <eos> (control), then a-z, A-Z, 0-9 and 'Ġ' (space).
std::unique_ptr<tokenizer::BpeTokenizer> TinyTokenizer() { return tokenizer::TinyTestTokenizer(); }

SamplingParams Greedy(int max_tokens, OutputKind kind = OutputKind::kCumulative) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.output_kind = kind;
  return p;
}

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = 1 + (i * 5 + salt * 11) % 63;
  return v;
}

class EngineTest : public ::testing::Test {
 protected:
  void MakeEngine(FakeModelExecutor::Options fake = {}, EngineArgs args = {}) {
    if (args.max_num_batched_tokens == 2048) args.max_num_batched_tokens = 64;
    if (args.max_num_seqs == 64) args.max_num_seqs = 16;
    auto executor = std::make_unique<FakeModelExecutor>(fake);
    fake_ = executor.get();
    auto engine = AsyncLLMEngine::Create(args, std::move(executor), TinyTokenizer());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
  }

  // Drains the stream; returns all outputs.
  std::vector<RequestOutput> Drain(RequestOutputStream* stream) {
    std::vector<RequestOutput> outs;
    while (true) {
      absl::StatusOr<RequestOutput> o = stream->Next(absl::Seconds(30));
      if (!o.ok()) {
        EXPECT_EQ(o.status().code(), absl::StatusCode::kOutOfRange) << o.status();
        break;
      }
      outs.push_back(std::move(*o));
    }
    return outs;
  }

  FakeModelExecutor* fake_ = nullptr;
  std::unique_ptr<AsyncLLMEngine> engine_;
};

TEST_F(EngineTest, ManyConcurrentGeneratesFromSeveralThreads) {
  FakeModelExecutor::Options o;
  o.num_blocks = 128;
  MakeEngine(o);
  const tokenizer::BpeTokenizer* tok = engine_->GetTokenizer();
  constexpr int kThreads = 4, kPerThread = 8;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::vector<int32_t> prompt = Prompt(3 + (t * 7 + i) % 20, t * 100 + i);
        const int max_tokens = 1 + (t + i) % 10;
        auto stream = engine_->Generate(prompt, Greedy(max_tokens), absl::StrCat("t", t, "-", i));
        if (!stream.ok()) {
          ++failures;
          continue;
        }
        std::vector<RequestOutput> outs = Drain(stream->get());
        if (outs.empty() || !outs.back().finished) {
          ++failures;
          continue;
        }
        const CompletionOutput& c = outs.back().outputs[0];
        const std::vector<int32_t> expected = fake_->Generate(prompt, max_tokens);
        if (c.token_ids != expected || c.finish_reason != "length" ||
            c.text != *tok->Decode(expected, true) || outs.back().prompt_token_ids != prompt) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(engine_->GetNumUnfinishedRequests(), 0);
  absl::StatusOr<RequestStatus> st = engine_->GetRequestStatus("t0-0");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(*st, RequestStatus::kCompleted);
  EXPECT_EQ(engine_->GetRequestStatus("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_GT(fake_->num_steps(), 0);
  EXPECT_LE(fake_->max_batch_tokens(), 64);
}

TEST_F(EngineTest, DeltasConcatenateToCumulative) {
  MakeEngine();
  auto delta = engine_->Generate("abc def", Greedy(24, OutputKind::kDelta), "delta");
  auto cumulative = engine_->Generate("abc def", Greedy(24), "cumulative");
  auto final_only = engine_->Generate("abc def", Greedy(24, OutputKind::kFinalOnly), "final");
  ASSERT_TRUE(delta.ok() && cumulative.ok() && final_only.ok());
  std::vector<RequestOutput> d = Drain(delta->get());
  std::vector<RequestOutput> c = Drain(cumulative->get());
  std::vector<RequestOutput> f = Drain(final_only->get());
  ASSERT_GT(d.size(), 1u);
  ASSERT_EQ(f.size(), 1u);
  std::string text;
  std::vector<int32_t> ids;
  for (const RequestOutput& o : d) {
    text += o.outputs[0].text;
    ids.insert(ids.end(), o.outputs[0].token_ids.begin(), o.outputs[0].token_ids.end());
  }
  const CompletionOutput& all = c.back().outputs[0];
  EXPECT_EQ(all.token_ids.size(), 24u);
  EXPECT_EQ(text, all.text);
  EXPECT_EQ(ids, all.token_ids);
  EXPECT_EQ(f[0].outputs[0].text, all.text);
  EXPECT_FALSE(all.text.empty());
  EXPECT_EQ(c.back().prompt, "abc def");
  EXPECT_EQ(c.back().prompt_token_ids, engine_->GetTokenizer()->Encode("abc def", true));
  // Cumulative outputs grow monotonically.
  for (size_t i = 1; i < c.size(); ++i) {
    EXPECT_GE(c[i].outputs[0].token_ids.size(), c[i - 1].outputs[0].token_ids.size());
  }
  EXPECT_NEAR(d.back().outputs[0].cumulative_logprob, all.cumulative_logprob, 1e-4);
  EXPECT_LE(all.cumulative_logprob, 0.0);
  EXPECT_GE(c.back().metrics.first_token_time, c.back().metrics.arrival_time);
}

TEST_F(EngineTest, AbortMidStream) {
  FakeModelExecutor::Options o;
  o.step_delay = absl::Milliseconds(5);
  MakeEngine(o);
  auto stream = engine_->Generate(Prompt(5, 1), Greedy(200, OutputKind::kDelta), "long");
  ASSERT_TRUE(stream.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*stream)->Next(absl::Seconds(10)).ok());
  absl::StatusOr<RequestStatus> st = engine_->GetRequestStatus("long");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(*st, RequestStatus::kRunning);
  ASSERT_TRUE(engine_->Abort("long").ok());
  std::vector<RequestOutput> rest = Drain(stream->get());
  ASSERT_FALSE(rest.empty());
  EXPECT_TRUE(rest.back().finished);
  EXPECT_EQ(rest.back().outputs[0].finish_reason, "abort");
  size_t tokens = 3;
  for (const auto& r : rest) tokens += r.outputs[0].token_ids.size();
  EXPECT_LT(tokens, 200u);
  EXPECT_EQ(*engine_->GetRequestStatus("long"), RequestStatus::kCancelled);
  EXPECT_EQ(engine_->Abort("long").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine_->GetNumUnfinishedRequests(), 0);
  // Blocks are back: a round trip through the loop publishes fresh stats.
  ASSERT_TRUE(engine_->ResetPrefixCache().ok());
  auto s2 = engine_->Generate(Prompt(2, 2), Greedy(1), "probe");
  ASSERT_TRUE(s2.ok());
  Drain(s2->get());
  ASSERT_TRUE(engine_->ResetPrefixCache().ok());
  EXPECT_EQ(engine_->GetStats().kv_usage, 0.0);
}

TEST_F(EngineTest, AbortWhileWaitingAndSleeping) {
  MakeEngine();
  ASSERT_TRUE(engine_->Sleep(1).ok());
  EXPECT_TRUE(engine_->IsSleeping());
  auto stream = engine_->Generate(Prompt(5, 1), Greedy(4), "w");
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ((*stream)->Next(absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(*engine_->GetRequestStatus("w"), RequestStatus::kWaiting);
  ASSERT_TRUE(engine_->Abort("w").ok());
  std::vector<RequestOutput> outs = Drain(stream->get());
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].outputs[0].finish_reason, "abort");
  EXPECT_TRUE(outs[0].outputs[0].token_ids.empty());

  auto later = engine_->Generate(Prompt(5, 1), Greedy(4), "after-wake");
  ASSERT_TRUE(later.ok());
  EXPECT_EQ((*later)->Next(absl::Milliseconds(50)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(engine_->WakeUp().ok());
  EXPECT_FALSE(engine_->IsSleeping());
  outs = Drain(later->get());
  ASSERT_FALSE(outs.empty());
  EXPECT_EQ(outs.back().outputs[0].token_ids, fake_->Generate(Prompt(5, 1), 4));
}

TEST_F(EngineTest, SleepMidRequestPreemptsAndResumesWithSameOutput) {
  FakeModelExecutor::Options o;
  o.step_delay = absl::Milliseconds(2);
  MakeEngine(o);
  auto stream = engine_->Generate(Prompt(9, 3), Greedy(40), "s");
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE((*stream)->Next(absl::Seconds(10)).ok());
  ASSERT_TRUE(engine_->Sleep(1).ok());
  ASSERT_TRUE(engine_->WakeUp().ok());
  std::vector<RequestOutput> outs = Drain(stream->get());
  ASSERT_FALSE(outs.empty());
  EXPECT_EQ(outs.back().outputs[0].token_ids, fake_->Generate(Prompt(9, 3), 40));
}

TEST_F(EngineTest, ValidationErrors) {
  FakeModelExecutor::Options o;
  o.max_model_len = 64;
  MakeEngine(o);
  auto s1 = engine_->Generate(Prompt(4, 1), Greedy(50), "dup");
  ASSERT_TRUE(s1.ok());
  auto s2 = engine_->Generate(Prompt(4, 1), Greedy(5), "dup");
  EXPECT_EQ(s2.status().code(), absl::StatusCode::kAlreadyExists);
  Drain(s1->get());
  // Finished ids may be reused.
  auto s3 = engine_->Generate(Prompt(4, 1), Greedy(5), "dup");
  ASSERT_TRUE(s3.ok()) << s3.status();
  Drain(s3->get());

  SamplingParams bad = Greedy(5);
  bad.temperature = -1.0f;
  auto s4 = engine_->Generate(Prompt(4, 1), bad, "bad");
  EXPECT_EQ(s4.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s4.status().message().find("temperature"), std::string::npos);
  bad = Greedy(5);
  bad.max_tokens = 0;
  s4 = engine_->Generate(Prompt(4, 1), bad, "bad");
  EXPECT_NE(s4.status().message().find("max_tokens"), std::string::npos);
  auto s5 = engine_->Generate(Prompt(40, 1), Greedy(30), "long");
  EXPECT_EQ(s5.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s5.status().message().find("maximum model length"), std::string::npos);
  auto s6 = engine_->Generate(Prompt(4, 1), Greedy(5), "");
  EXPECT_EQ(s6.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->GetNumUnfinishedRequests(), 0);
}

TEST_F(EngineTest, CallbackVariant) {
  MakeEngine();
  absl::Notification done;
  std::vector<int32_t> ids;
  std::string reason;
  ASSERT_TRUE(engine_
                  ->GenerateWithCallback(Prompt(6, 2), Greedy(7, OutputKind::kDelta), "cb",
                                         [&](const RequestOutput& o) {
                                           ids.insert(ids.end(), o.outputs[0].token_ids.begin(),
                                                      o.outputs[0].token_ids.end());
                                           if (o.finished) {
                                             reason = o.outputs[0].finish_reason;
                                             done.Notify();
                                           }
                                         })
                  .ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(ids, fake_->Generate(Prompt(6, 2), 7));
  EXPECT_EQ(reason, "length");
}

TEST_F(EngineTest, ExecutorFailureMakesEngineDeadWithCause) {
  FakeModelExecutor::Options o;
  o.step_delay = absl::Milliseconds(5);
  MakeEngine(o);
  EXPECT_TRUE(engine_->CheckHealth().ok());
  EXPECT_TRUE(engine_->IsRunning());
  EXPECT_TRUE(engine_->DeadError().ok());
  // The executor fails while a request runs: it ends with the cause, either
  // from the failed step or from the executor's health between steps.
  auto stream = engine_->Generate(Prompt(4, 1), Greedy(200), "victim");
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE((*stream)->Next(absl::Seconds(10)).ok());
  fake_->SetFailure(absl::InternalError("worker 0 died"));
  std::vector<RequestOutput> outs = Drain(stream->get());
  ASSERT_FALSE(outs.empty());
  EXPECT_EQ(outs.back().outputs[0].finish_reason, "error");
  EXPECT_NE(outs.back().error.message().find("worker 0 died"), std::string::npos);
  // Retryable once the engine is restarted, whichever path ended it.
  EXPECT_EQ(outs.back().error.code(), absl::StatusCode::kUnavailable) << outs.back().error;
  EXPECT_FALSE(engine_->DeadError().ok());
  EXPECT_NE(engine_->CheckHealth().message().find("worker 0 died"), std::string::npos);
  EXPECT_NE(engine_->DeadError().message().find("worker 0 died"), std::string::npos);
  EXPECT_EQ(engine_->Generate(Prompt(4, 1), Greedy(5), "x").status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(*engine_->GetRequestStatus("victim"), RequestStatus::kFailed);
}

TEST_F(EngineTest, ExecutorUnhealthyWhileIdleRefusesNewRequests) {
  MakeEngine();
  fake_->SetFailure(absl::InternalError("worker 1 was killed"));
  absl::Status health = engine_->CheckHealth();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(health.message().find("worker 1 was killed"), std::string::npos) << health;
  auto refused = engine_->Generate(Prompt(4, 1), Greedy(5), "late");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("worker 1 was killed"), std::string::npos);
}

TEST_F(EngineTest, StopAbortsUnfinishedAndConfigIsReported) {
  FakeModelExecutor::Options o;
  o.step_delay = absl::Milliseconds(5);
  MakeEngine(o);
  const EngineConfig& c = engine_->GetEngineConfig();
  EXPECT_EQ(c.cache.block_size, 4);
  EXPECT_EQ(c.cache.num_blocks, 64);
  EXPECT_EQ(c.scheduler.max_num_batched_tokens, 64);
  EXPECT_EQ(c.model.max_model_len, 256);
  EXPECT_EQ(engine_->GetModelConfig().vocab_size, 64);
  auto stream = engine_->Generate(Prompt(4, 1), Greedy(200), "r");
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE((*stream)->Next(absl::Seconds(10)).ok());
  // Stats are published after the step that delivered the output: wait for them.
  EngineStats stats = engine_->DoLogStats();
  for (int i = 0; i < 200 && stats.num_running + stats.num_waiting != 1; ++i) {
    absl::SleepFor(absl::Milliseconds(5));
    stats = engine_->DoLogStats();
  }
  EXPECT_EQ(stats.num_running + stats.num_waiting, 1);
  engine_->Stop();
  EXPECT_FALSE(engine_->IsRunning());
  EXPECT_FALSE(engine_->CheckHealth().ok());
  std::vector<RequestOutput> outs = Drain(stream->get());
  ASSERT_FALSE(outs.empty());
  EXPECT_EQ(outs.back().outputs[0].finish_reason, "abort");
  EXPECT_EQ(engine_->Generate(Prompt(4, 1), Greedy(5), "x").status().code(),
            absl::StatusCode::kUnavailable);
  engine_->Start();
  auto again = engine_->Generate(Prompt(4, 1), Greedy(3), "x");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Drain(again->get()).back().outputs[0].token_ids, fake_->Generate(Prompt(4, 1), 3));
}

TEST_F(EngineTest, LogprobsAndSeededSamplingAreBatchInvariant) {
  MakeEngine();
  SamplingParams p;
  p.temperature = 1.5f;
  p.seed = 1234;
  p.max_tokens = 12;
  p.ignore_eos = true;
  p.logprobs = 3;
  auto alone = engine_->Generate(Prompt(5, 7), p, "alone");
  ASSERT_TRUE(alone.ok());
  const CompletionOutput a = Drain(alone->get()).back().outputs[0];
  std::vector<std::shared_ptr<RequestOutputStream>> others;
  for (int i = 0; i < 6; ++i) {
    SamplingParams q = p;
    q.seed = 99 + i;
    others.push_back(*engine_->Generate(Prompt(5 + i, i), q, absl::StrCat("o", i)));
  }
  auto batched = engine_->Generate(Prompt(5, 7), p, "batched");
  ASSERT_TRUE(batched.ok());
  const CompletionOutput b = Drain(batched->get()).back().outputs[0];
  for (auto& s : others) Drain(s.get());
  EXPECT_EQ(a.token_ids, b.token_ids);
  ASSERT_EQ(a.top_logprobs.size(), 12u);
  ASSERT_EQ(a.top_logprobs[0].size(), 3u);
  EXPECT_GE(a.top_logprobs[0][0].second, a.top_logprobs[0][1].second);
  ASSERT_EQ(a.logprobs.size(), 12u);
}

}  // namespace
}  // namespace rill::engine

namespace rill::engine {
namespace {

TEST_F(EngineTest, LoggersReceiveStatsAndCanBeRemoved) {
  MakeEngine();
  std::atomic<int> calls{0};
  std::atomic<int64_t> generated{0};
  ASSERT_TRUE(engine_
                  ->AddLogger("counter",
                              [&](const EngineStats& s) {
                                ++calls;
                                generated = s.generation_tokens;
                              })
                  .ok());
  EXPECT_EQ(engine_->AddLogger("counter", [](const EngineStats&) {}).code(),
            absl::StatusCode::kAlreadyExists);
  auto stream = engine_->Generate(Prompt(5, 1), Greedy(6), "logged");
  ASSERT_TRUE(stream.ok());
  Drain(stream->get());
  // Stats are published after the step's outputs, so poll briefly.
  for (int i = 0; i < 200 && generated.load() < 6; ++i) {
    engine_->DoLogStats();
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GE(calls.load(), 1);
  EXPECT_GE(generated.load(), 6);
  ASSERT_TRUE(engine_->RemoveLogger("counter").ok());
  const int before = calls.load();
  engine_->DoLogStats();
  EXPECT_EQ(calls.load(), before);
  EXPECT_EQ(engine_->RemoveLogger("counter").code(), absl::StatusCode::kNotFound);
}

TEST_F(EngineTest, ProfileWritesOneTraceEventPerStep) {
  MakeEngine();
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(engine_->StopProfile().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_->StartProfile("/no/such/dir").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(engine_->StartProfile(dir).ok());
  EXPECT_EQ(engine_->StartProfile(dir).code(), absl::StatusCode::kFailedPrecondition);
  const int64_t steps_before = fake_->num_steps();
  auto stream = engine_->Generate(Prompt(5, 2), Greedy(8), "profiled");
  ASSERT_TRUE(stream.ok());
  Drain(stream->get());
  absl::StatusOr<std::string> path = engine_->StopProfile();
  ASSERT_TRUE(path.ok()) << path.status();
  std::ifstream in(*path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string trace = ss.str();
  EXPECT_EQ(trace.rfind("{\"traceEvents\":[", 0), 0u) << trace;
  int events = 0;
  for (size_t p = trace.find("\"ph\":\"X\""); p != std::string::npos;
       p = trace.find("\"ph\":\"X\"", p + 1)) {
    ++events;
  }
  EXPECT_EQ(events, fake_->num_steps() - steps_before);
  EXPECT_GE(events, 8);
}

}  // namespace
}  // namespace rill::engine
