// EngineMetrics through a real AsyncEngine over the fake executor: the
// vLLM families count a known workload (prefix-cache hits, preemptions,
// histogram counts) and GetStats reads the same numbers.
#include "engine/engine_metrics.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "engine/async_engine.h"
#include "engine/fake_model_executor.h"

namespace rill::engine {
namespace {

// The value of the exposition line that starts with `series` + " ".
double Sample(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, series + " ")) {
      double v = 0;
      EXPECT_TRUE(absl::SimpleAtod(line.substr(series.size() + 1), &v)) << line;
      return v;
    }
  }
  ADD_FAILURE() << "no series " << series << " in\n" << text;
  return -1;
}

std::string M(const std::string& name, const std::string& extra = "") {
  return name + "{model_name=\"fake\"" + extra + "}";
}

class EngineMetricsTest : public ::testing::Test {
 protected:
  void MakeEngine(FakeModelExecutor::Options fake) {
    EngineArgs args;
    args.model = "fake";
    args.max_num_batched_tokens = 64;
    args.max_num_seqs = 16;
    auto engine = AsyncEngine::Create(args, std::make_unique<FakeModelExecutor>(fake));
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
  }

  std::shared_ptr<RequestOutputStream> Start(std::vector<int32_t> prompt, int max_tokens,
                                             const std::string& id) {
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    auto stream = engine_->Generate(std::move(prompt), p, id);
    EXPECT_TRUE(stream.ok()) << stream.status();
    return *stream;
  }

  void Drain(RequestOutputStream* stream) {
    while (stream->Next(absl::Seconds(60)).ok()) {
    }
  }

  // The gauges are published after the loop's iteration: wait for idle.
  std::string IdleExposition() {
    for (int i = 0; i < 2000; ++i) {
      const EngineStats s = engine_->GetStats();
      if (s.num_running == 0 && s.num_waiting == 0 && s.kv_usage == 0.0) break;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return engine_->Metrics().Exposition();
  }

  std::unique_ptr<AsyncEngine> engine_;
};

TEST_F(EngineMetricsTest, CountsAKnownWorkloadAndGetStatsAgrees) {
  MakeEngine({});  // 64 blocks of 4 tokens.
  std::vector<int32_t> prompt(17);
  for (int i = 0; i < 17; ++i) prompt[i] = 1 + i;
  Drain(Start(prompt, 5, "a").get());
  Drain(Start(prompt, 3, "b").get());  // Reuses a's 4 full prompt blocks.
  const std::string text = IdleExposition();

  EXPECT_EQ(Sample(text, M("vllm:prompt_tokens_total")), 34);
  EXPECT_EQ(Sample(text, M("vllm:generation_tokens_total")), 8);
  EXPECT_EQ(Sample(text, M("vllm:request_success_total", ",finished_reason=\"length\"")), 2);
  EXPECT_EQ(Sample(text, M("vllm:request_success_total", ",finished_reason=\"abort\"")), 0);
  EXPECT_EQ(Sample(text, M("vllm:prefix_cache_queries_total")), 34);
  EXPECT_EQ(Sample(text, M("vllm:prefix_cache_hits_total")), 16);
  EXPECT_EQ(Sample(text, M("rill:prompt_tokens_computed_total")), 17 + 1);
  EXPECT_EQ(Sample(text, M("vllm:time_to_first_token_seconds_count")), 2);
  EXPECT_EQ(Sample(text, M("vllm:inter_token_latency_seconds_count")), 8 - 2);
  EXPECT_EQ(Sample(text, M("vllm:e2e_request_latency_seconds_count")), 2);
  EXPECT_EQ(Sample(text, M("vllm:request_generation_tokens_sum")), 8);
  EXPECT_EQ(Sample(text, M("vllm:request_generation_tokens_bucket", ",le=\"2\"")), 0);
  EXPECT_EQ(Sample(text, M("vllm:request_generation_tokens_bucket", ",le=\"5\"")), 2);
  EXPECT_EQ(Sample(text, M("vllm:request_prompt_tokens_bucket", ",le=\"10\"")), 0);
  EXPECT_EQ(Sample(text, M("vllm:request_prompt_tokens_bucket", ",le=\"20\"")), 2);
  EXPECT_EQ(Sample(text, M("vllm:num_requests_running")), 0);
  EXPECT_EQ(Sample(text, M("vllm:kv_cache_usage_perc")), 0);
  const double steps = Sample(text, M("rill:engine_steps_total"));
  EXPECT_GT(steps, 0);
  EXPECT_EQ(Sample(text, M("vllm:iteration_tokens_total_count")), steps);
  EXPECT_EQ(Sample(text, M("rill:engine_batch_size_count")), steps);

  const EngineStats stats = engine_->GetStats();
  EXPECT_EQ(stats.requests_finished, 2);
  EXPECT_EQ(stats.generation_tokens, 8);
  EXPECT_EQ(stats.prompt_tokens, 18);
  EXPECT_EQ(stats.steps, steps);
  EXPECT_DOUBLE_EQ(stats.prefix_cache_hit_rate, 16.0 / 34.0);
}

TEST_F(EngineMetricsTest, PreemptionsAndAbortsAreCounted) {
  FakeModelExecutor::Options fake;
  fake.num_blocks = 8;  // 32 tokens: two requests growing to 28 cannot both run.
  fake.step_delay = absl::Milliseconds(5);  // c is still running when the abort lands.
  MakeEngine(fake);
  auto a = Start({1, 2, 3, 4, 5, 6, 7, 8}, 20, "a");
  auto b = Start({9, 10, 11, 12, 13, 14, 15, 16}, 20, "b");
  Drain(a.get());
  Drain(b.get());
  auto c = Start({1, 2, 3}, 29, "c");  // Fits the cache; aborted after its first token.
  ASSERT_TRUE(c->Next(absl::Seconds(60)).ok());
  ASSERT_TRUE(engine_->Abort("c").ok());
  Drain(c.get());
  const std::string text = IdleExposition();
  const double preemptions = Sample(text, M("vllm:num_preemptions_total"));
  EXPECT_GE(preemptions, 1);
  EXPECT_EQ(engine_->GetStats().preemptions, preemptions);
  EXPECT_EQ(Sample(text, M("vllm:request_success_total", ",finished_reason=\"abort\"")), 1);
  EXPECT_EQ(engine_->GetStats().requests_aborted, 1);
  EXPECT_EQ(Sample(text, M("vllm:request_success_total", ",finished_reason=\"length\"")), 2);
}

// Without tensor parallelism the collective family is there and empty.
TEST_F(EngineMetricsTest, TpCollectiveTimeStaysZeroAtOneRank) {
  MakeEngine({});
  Drain(Start({1, 2, 3}, 4, "a").get());
  const std::string text = IdleExposition();
  EXPECT_NE(text.find("# TYPE rill:tp_collective_seconds histogram"), std::string::npos) << text;
  EXPECT_EQ(Sample(text, M("rill:tp_collective_seconds_count")), 0);
  EXPECT_EQ(Sample(text, M("rill:tp_collective_seconds_sum")), 0);
  EXPECT_EQ(engine_->GetStats().tp_collective_seconds, 0);
}

// With tensor parallelism every step's collective time (what the executor
// reports after Execute) is observed once, and GetStats sums the same.
TEST_F(EngineMetricsTest, TpCollectiveTimeIsObservedPerStep) {
  FakeModelExecutor::Options fake;
  fake.tensor_parallel_size = 2;
  fake.collective_per_step = absl::Milliseconds(2);
  MakeEngine(fake);
  Drain(Start({1, 2, 3}, 4, "a").get());
  const std::string text = IdleExposition();
  const double steps = Sample(text, M("rill:engine_steps_total"));
  EXPECT_GT(steps, 0);
  EXPECT_EQ(Sample(text, M("rill:tp_collective_seconds_count")), steps);
  EXPECT_NEAR(Sample(text, M("rill:tp_collective_seconds_sum")), 0.002 * steps, 1e-9);
  EXPECT_NEAR(engine_->GetStats().tp_collective_seconds, 0.002 * steps, 1e-9);
}

}  // namespace
}  // namespace rill::engine
