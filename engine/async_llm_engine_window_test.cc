// Sliding-window models through the whole engine: tiny random Mistral and
// Phi-3 (window 8 on every layer: blocks out of the window are freed), Qwen2
// (window 6 on its second layer), Gemma 2/3 (alternating layers) give
// the float64 reference's greedy continuation with the prompt prefilled in
// 7-token chunks, several requests batched together, and a prefix-cache hit;
// so do tiny Mixtral, Qwen2-MoE and Qwen3-MoE models.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/json.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"
#include "tests/util/tiny_models.h"

namespace rill::engine {
namespace {

using rill::tests::util::RunPython;

constexpr int kGreedyTokens = 24;
constexpr int kPromptTokens = 40;  // five windows of 8

// The reference's greedy continuation of `prompt` on the model at `path`.
std::vector<int32_t> ReferenceGreedy(const std::string& path, const std::vector<int32_t>& prompt) {
  absl::StatusOr<rill::tests::util::CommandResult> r =
      RunPython("tests/reference/reference_model.py",
                {"--model", path, "--tokens", absl::StrJoin(prompt, ","), "--greedy",
                 absl::StrCat(kGreedyTokens)});
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_EQ(r->exit_code, 0) << r->output;
  // stdout ends with one JSON line.
  const std::string& out = r->output;
  const size_t start = out.rfind("\n{");
  absl::StatusOr<base::json::JsonValue> j =
      base::json::ParseJson(out.substr(start == std::string::npos ? 0 : start + 1));
  EXPECT_TRUE(j.ok()) << j.status() << "\n" << out;
  std::vector<int32_t> ids;
  if (!j.ok() || j->Find("greedy") == nullptr) return ids;
  for (const base::json::JsonValue& v : j->Find("greedy")->array_items()) {
    ids.push_back(static_cast<int32_t>(v.AsInt64().value_or(-1)));
  }
  return ids;
}

class WindowEngineTest
    : public rill::tests::util::TinyModels<::testing::TestWithParam<std::string>> {};

TEST_P(WindowEngineTest, ChunkedBatchedAndCachedMatchReference) {
  std::cout << "tiny model seed " << seed_ << "\n";
  const std::string path = absl::StrCat(dir_, "/", GetParam());
  EngineArgs args;
  args.model = path;
  args.kv_cache_mb = 16;
  args.max_model_len = 128;
  args.max_num_seqs = 4;
  args.max_num_batched_tokens = 7;  // prompts prefill in chunks across windows
  args.enable_prefix_caching = true;
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine = CreateAsyncLLMEngine(args);
  ASSERT_TRUE(engine.ok()) << engine.status();

  std::mt19937 rng(seed_ ^ std::hash<std::string>{}(GetParam()));
  std::uniform_int_distribution<int32_t> token(0, 298);
  std::vector<std::vector<int32_t>> prompts(3);
  for (auto& p : prompts) {
    for (int i = 0; i < kPromptTokens; ++i) p.push_back(token(rng));
  }
  prompts.push_back(prompts[0]);  // the same prompt again: a prefix-cache hit
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = kGreedyTokens;
  greedy.ignore_eos = true;
  std::vector<std::shared_ptr<RequestOutputStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    // The repeat starts after the first has finished, so its blocks are cached.
    if (i + 1 == prompts.size()) {
      while (true) {
        absl::StatusOr<RequestOutput> o = streams[0]->Next(absl::Seconds(120));
        if (!o.ok() || o->finished) break;
      }
    }
    auto s = (*engine)->Generate(prompts[i], greedy, absl::StrCat("r", i));
    ASSERT_TRUE(s.ok()) << s.status();
    streams.push_back(*s);
  }
  const std::vector<int32_t> first_ref = ReferenceGreedy(path, prompts[0]);
  for (size_t i = 1; i < prompts.size(); ++i) {
    std::vector<int32_t> got;
    while (true) {
      absl::StatusOr<RequestOutput> o = streams[i]->Next(absl::Seconds(120));
      if (!o.ok()) break;
      // Cumulative outputs (the default): the latest holds every token.
      if (!o->outputs.empty()) got = o->outputs[0].token_ids;
      if (o->finished) break;
    }
    const std::vector<int32_t> want =
        i + 1 == prompts.size() ? first_ref : ReferenceGreedy(path, prompts[i]);
    EXPECT_EQ(got, want) << GetParam() << " request " << i << " prompt "
                         << absl::StrJoin(prompts[i], ",");
  }
}

INSTANTIATE_TEST_SUITE_P(TinyWindowModels, WindowEngineTest,
                         ::testing::Values("mistral_window/hf-f32", "mistral_window/model.f32.gguf",
                                           "qwen2_window/hf-f32", "gemma2/hf-f32",
                                           "gemma2/model.q8_0.gguf", "gemma3/model.q8_0.gguf",
                                           "gemma3_tf5/hf-f32", "phi3/hf-f32",
                                           "phi3_longrope/model.f32.gguf"),
                         rill::tests::util::TinyModelTestName);

// Mixture-of-experts models through the same engine path: a step's chunks
// and decodes share experts, and each request still gets the reference's
// continuation.
INSTANTIATE_TEST_SUITE_P(TinyMoeModels, WindowEngineTest,
                         ::testing::Values("mixtral/model.q8_0.gguf", "qwen2_moe/hf-f32",
                                           "qwen3_moe/model.f32.gguf"),
                         rill::tests::util::TinyModelTestName);

}  // namespace
}  // namespace rill::engine
