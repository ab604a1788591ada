// Speculative decoding on the real default model: greedy outputs of 20
// prompts x 128 tokens, all running at once, are identical with and without
// n-gram drafts, drafts are accepted, and the spec_decode_* metrics count
// them. Skips when the model is absent.

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/model_dir.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/model_path.h"

namespace rill::engine {
namespace {

constexpr int kTokens = 128;

// Prompts whose answers copy from them (lists, code, repeated phrases) and
// a few plain ones.
std::vector<std::string> Prompts() {
  const char* items[] = {"apple", "river", "copper", "violin", "lantern"};
  std::vector<std::string> out;
  for (int i = 0; i < 20; ++i) {
    const char* a = items[i % 5];
    const char* b = items[(i + 2) % 5];
    switch (i % 4) {
      case 0:
        out.push_back(absl::StrCat("Repeat this list three times: ", a, ", ", b, ", stone, ", i,
                                   ", cloud.\n", a, ", ", b, ", stone, ", i, ", cloud.\n"));
        break;
      case 1:
        out.push_back(absl::StrCat("def count_", a, "(items):\n    total = 0\n    for item in items:\n"
                                   "        if item == '", a, "':\n            total += 1\n"
                                   "    return total\n\ndef count_", b, "(items):\n"));
        break;
      case 2:
        out.push_back(absl::StrCat("Rewrite with '", b, "' instead of '", a, "': The ", a,
                                   " is on the table. I like the ", a, ". Give me the ", a,
                                   " now.\nRewritten:"));
        break;
      default:
        out.push_back(absl::StrCat("Write a short story about a ", a, " and a ", b, "."));
    }
  }
  return out;
}

std::vector<std::vector<int32_t>> RunAll(AsyncLLMEngine* engine,
                                         const std::vector<std::string>& prompts) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = kTokens;
  p.ignore_eos = true;
  std::vector<std::shared_ptr<RequestOutputStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto s = engine->Generate(prompts[i], p, absl::StrCat("p", i));
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) streams.push_back(*s);
  }
  std::vector<std::vector<int32_t>> out(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    RequestOutput last;
    while (true) {
      absl::StatusOr<RequestOutput> o = streams[i]->Next(absl::Seconds(600));
      if (!o.ok()) break;
      last = std::move(*o);
    }
    EXPECT_TRUE(last.finished) << i;
    if (!last.outputs.empty()) out[i] = last.outputs[0].token_ids;
  }
  return out;
}

// The value of a counter labelled only by model_name in the exposition.
double CounterValue(const std::string& exposition, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::StartsWith(line, name + "{")) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) return v;
  }
  return -1;
}

EngineArgs Args(int k) {
  EngineArgs args;
  args.kv_cache_mb = 256;
  args.max_model_len = 512;
  args.max_num_seqs = 20;
  args.max_num_batched_tokens = 512;
  args.speculative_ngram_k = k;
  args.speculative_disable_batch_size = 64;  // All 20 running speculate.
  return args;
}

TEST(SpecDecodeModelTest, GreedyIdenticalWithAndWithoutNgramDrafts) {
  if (!base::DefaultModelFileExists())
    GTEST_SKIP() << "default model not found at " << ResolveModelPath("default");
  const std::vector<std::string> prompts = Prompts();
  std::vector<std::vector<int32_t>> plain;
  {
    auto e = CreateAsyncLLMEngine(Args(0));
    ASSERT_TRUE(e.ok()) << e.status();
    plain = RunAll(e->get(), prompts);
  }
  auto e = CreateAsyncLLMEngine(Args(4));
  ASSERT_TRUE(e.ok()) << e.status();
  const std::vector<std::vector<int32_t>> spec = RunAll(e->get(), prompts);
  ASSERT_EQ(spec.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(spec[i].size(), static_cast<size_t>(kTokens)) << i;
    EXPECT_EQ(spec[i], plain[i]) << "prompt " << i << ": " << prompts[i];
  }
  // The loop publishes its counters after each iteration.
  double drafts = -1, draft_tokens = -1, accepted = -1;
  for (int i = 0; i < 100; ++i) {
    const std::string text = (*e)->Metrics().Exposition();
    drafts = CounterValue(text, "vllm:spec_decode_num_drafts_total");
    draft_tokens = CounterValue(text, "vllm:spec_decode_num_draft_tokens_total");
    accepted = CounterValue(text, "vllm:spec_decode_num_accepted_tokens_total");
    if (accepted > 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  LOG(INFO) << "drafts " << drafts << ", draft tokens " << draft_tokens << ", accepted "
            << accepted << " (" << 20 * kTokens << " tokens generated)";
  EXPECT_GT(drafts, 0);
  EXPECT_GT(accepted, 0);
  EXPECT_LE(accepted, draft_tokens);
  // Per position (0..k-1): together they are the accepted tokens.
  const std::string text = (*e)->Metrics().Exposition();
  const std::string per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total{";
  double sum = 0;
  int positions = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, per_pos)) continue;
    double v = 0;
    ASSERT_TRUE(absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) << line;
    sum += v;
    ++positions;
  }
  EXPECT_EQ(positions, 4);
  EXPECT_EQ(sum, accepted);
}

}  // namespace
}  // namespace rill::engine
