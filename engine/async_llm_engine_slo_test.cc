// SLO-aware scheduling (--target_itl_ms) on the real default model: a long
// prompt arrives while 8 requests decode. With the target, the decodes'
// inter-token latency stays near it while the long prompt is prefilled in
// pieces (its TTFT is reported); without it, the prompt's one big chunk
// stalls every decode for the whole prefill. On a machine so loaded that
// decodes alone take longer than the target, "near it" means near what
// decodes alone take. Skips when the model is absent.

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/model_dir.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/model_path.h"
#include "engine/slo_budget.h"

namespace rill::engine {
namespace {

constexpr int kDecodes = 8;
constexpr int kLongPromptTokens = 1200;
constexpr int kTargetItlMs = 150;
constexpr size_t kLongOutputTokens = 8;
// A 2-core machine shared with builds: the decodes' p90 ITL during the
// prefill may exceed max(target, decode-only p90) by this factor.
constexpr double kNoiseMargin = 2.0;

SamplingParams Greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.output_kind = OutputKind::kDelta;
  return p;
}

std::vector<int32_t> TokenPrompt(int n, int salt) {
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = 200 + (i * 37 + salt * 1009) % 20000;
  return ids;
}

// Token arrival times of the decodes and the long prompt's submit / first
// token, as the engine's callbacks saw them.
struct Timeline {
  absl::Mutex mu;
  std::vector<std::vector<absl::Time>> tokens ABSL_GUARDED_BY(mu) =
      std::vector<std::vector<absl::Time>>(kDecodes);
  absl::Time long_first_token ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  std::vector<int32_t> long_tokens ABSL_GUARDED_BY(mu);
};

struct Result {
  std::vector<double> itl_ms;  // Decode gaps that overlap the long prefill.
  std::vector<double> decode_only_itl_ms;  // Decode gaps before it arrived.
  double ttft_ms = 0.0;        // The long prompt's.
  int64_t step_token_budget = 0;
  std::vector<int32_t> long_tokens;  // Its greedy output.
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

Result LongPromptDuringDecodes(int target_itl_ms) {
  EngineArgs args;
  args.kv_cache_mb = 512;
  args.max_model_len = 4096;
  args.max_num_seqs = 16;
  args.target_itl_ms = target_itl_ms;
  Timeline t;  // Outlives the engine, whose destructor still delivers aborts.
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine = CreateAsyncLLMEngine(args);
  CHECK(engine.ok()) << engine.status();
  for (int i = 0; i < kDecodes; ++i) {
    const absl::Status s = (*engine)->GenerateWithCallback(
        Prompt(TokenPrompt(24, i)), Greedy(2000), absl::StrCat("decode", i),
        [&t, i](const RequestOutput& o) {
          absl::MutexLock lock(&t.mu);
          if (!o.outputs.empty() && !o.outputs[0].token_ids.empty()) t.tokens[i].push_back(absl::Now());
        });
    CHECK(s.ok()) << s;
  }
  // Every decode running, and the step-time model fed with decode steps.
  {
    absl::MutexLock lock(&t.mu);
    t.mu.AwaitWithTimeout(absl::Condition(
                              +[](Timeline* tl) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tl->mu) {
                                for (const auto& v : tl->tokens) {
                                  if (v.size() < 10) return false;
                                }
                                return true;
                              },
                              &t),
                          absl::Seconds(120));
  }
  const absl::Time submitted = absl::Now();
  const absl::Status s = (*engine)->GenerateWithCallback(
      Prompt(TokenPrompt(kLongPromptTokens, 99)), Greedy(kLongOutputTokens), "long",
      [&t](const RequestOutput& o) {
        absl::MutexLock lock(&t.mu);
        if (o.outputs.empty() || o.outputs[0].token_ids.empty()) return;
        if (t.long_first_token == absl::InfinitePast()) t.long_first_token = absl::Now();
        const std::vector<int32_t>& ids = o.outputs[0].token_ids;
        t.long_tokens.insert(t.long_tokens.end(), ids.begin(), ids.end());
      });
  CHECK(s.ok()) << s;
  {
    absl::MutexLock lock(&t.mu);
    t.mu.AwaitWithTimeout(absl::Condition(
                              +[](Timeline* tl) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tl->mu) {
                                return tl->long_tokens.size() >= kLongOutputTokens;
                              },
                              &t),
                          absl::Seconds(300));
  }

  // One more round of decode tokens, so the gap that spans the end of the
  // prefill is counted.
  absl::SleepFor(absl::Milliseconds(3 * kTargetItlMs));
  Result r;
  r.step_token_budget = (*engine)->GetStats().step_token_budget;
  for (int i = 0; i < kDecodes; ++i) (void)(*engine)->Abort(absl::StrCat("decode", i));
  absl::MutexLock lock(&t.mu);
  r.long_tokens = t.long_tokens;
  r.ttft_ms = absl::ToDoubleMilliseconds(t.long_first_token - submitted);
  for (const auto& times : t.tokens) {
    for (size_t k = 1; k < times.size(); ++k) {
      const double gap = absl::ToDoubleMilliseconds(times[k] - times[k - 1]);
      if (times[k] > submitted && times[k - 1] < t.long_first_token) r.itl_ms.push_back(gap);
      if (k >= 3 && times[k] <= submitted) r.decode_only_itl_ms.push_back(gap);
    }
  }
  return r;
}

TEST(SloSchedulingModelTest, DecodesKeepTheirItlWhileALongPromptPrefills) {
  if (!base::DefaultModelFileExists())
    GTEST_SKIP() << "default model not found at " << ResolveModelPath("default");
  const Result slo = LongPromptDuringDecodes(kTargetItlMs);
  const Result fixed = LongPromptDuringDecodes(0);
  const double slo_p90 = Percentile(slo.itl_ms, 0.9);
  const double fixed_max = Percentile(fixed.itl_ms, 1.0);
  const double decode_only_p90 = Percentile(slo.decode_only_itl_ms, 0.9);
  LOG(INFO) << "target_itl_ms=" << kTargetItlMs << ": decode ITL p50 "
            << Percentile(slo.itl_ms, 0.5) << " ms, p90 " << slo_p90 << " ms, max "
            << Percentile(slo.itl_ms, 1.0) << " ms over " << slo.itl_ms.size()
            << " gaps; long prompt (" << kLongPromptTokens << " tokens) TTFT " << slo.ttft_ms
            << " ms; step token budget " << slo.step_token_budget << "; decode-only ITL p90 "
            << decode_only_p90 << " ms";
  LOG(INFO) << "no target: decode ITL max " << fixed_max << " ms over " << fixed.itl_ms.size()
            << " gaps; long prompt TTFT " << fixed.ttft_ms << " ms; step token budget "
            << fixed.step_token_budget;
  ::testing::Test::RecordProperty("slo_itl_p90_ms", std::to_string(slo_p90));
  ::testing::Test::RecordProperty("slo_long_ttft_ms", std::to_string(slo.ttft_ms));
  ::testing::Test::RecordProperty("fixed_itl_max_ms", std::to_string(fixed_max));
  ::testing::Test::RecordProperty("fixed_long_ttft_ms", std::to_string(fixed.ttft_ms));

  // Many steps ran during the prefill, each within the target (with margin).
  EXPECT_GE(slo.itl_ms.size(), static_cast<size_t>(4 * kDecodes));
  if (decode_only_p90 <= kTargetItlMs) {
    EXPECT_LE(slo_p90, kNoiseMargin * kTargetItlMs);
  } else {
    // So loaded that decodes alone miss the target: no chunk size keeps
    // their ITL, so prompts are not held back, and the long prompt's TTFT
    // stays near the run without a target (chunks double per step).
    LOG(WARNING) << "decodes alone take " << decode_only_p90 << " ms (p90) on this machine, over "
                 << "the " << kTargetItlMs << " ms target: checking the long prompt's TTFT";
    EXPECT_LE(slo.ttft_ms, kNoiseMargin * fixed.ttft_ms);
  }
  EXPECT_GT(slo.ttft_ms, 0.0);
  EXPECT_GT(slo.step_token_budget, 0);
  EXPECT_LT(slo.step_token_budget, 2048);
  // Without the option the prompt went in one 2048-token-budget step, which
  // every decode waited for: the old behaviour, and the stall the target
  // removes.
  EXPECT_EQ(fixed.step_token_budget, 2048);
  EXPECT_GT(fixed_max, slo_p90);
  // Chunk boundaries (adaptive pieces vs one chunk) do not change the
  // output: the kernels are batch invariant and the KV cache is exact.
  EXPECT_EQ(slo.long_tokens.size(), kLongOutputTokens);
  EXPECT_EQ(slo.long_tokens, fixed.long_tokens);
}

}  // namespace
}  // namespace rill::engine
