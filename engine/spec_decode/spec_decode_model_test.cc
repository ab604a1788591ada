// Speculative decoding on the real default model: greedy outputs of 20
// prompts x 128 tokens, all running at once, are identical with and without
// n-gram drafts and with draft models (the model itself: nearly every draft
// token accepted; a tiny random model of the same vocabulary: few), drafts
// are accepted, and the spec_decode_* metrics count them. Skips when the
// model is absent. The same over tiny random models (always runs), and a
// draft of another vocabulary refused at load.

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <memory>
#include <random>
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
#include "engine/stream_drain.h"
#include "worker/lora/lora_test_util.h"

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

// Greedy outputs of all prompts (text for an AsyncLLMEngine, token ids for
// either engine), submitted at once.
template <typename Engine, typename PromptT>
std::vector<std::vector<int32_t>> RunAll(Engine* engine, const std::vector<PromptT>& prompts,
                                         int max_tokens = kTokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  std::vector<std::shared_ptr<RequestOutputStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto s = engine->Generate(prompts[i], p, absl::StrCat("p", i));
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) streams.push_back(*s);
  }
  std::vector<std::vector<int32_t>> out(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    RequestOutput last = engine::testing::LastOutput(*streams[i], absl::Seconds(600));
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

struct SpecCounts {
  double drafts = -1, draft_tokens = -1, accepted = -1;
};

// The engine's spec_decode_* counters once it has published drafts (the
// loop publishes its counters after each iteration).
SpecCounts ReadSpecCounts(const AsyncEngine& engine) {
  SpecCounts c;
  for (int i = 0; i < 100; ++i) {
    const std::string text = engine.Metrics().Exposition();
    c.drafts = CounterValue(text, "vllm:spec_decode_num_drafts_total");
    c.draft_tokens = CounterValue(text, "vllm:spec_decode_num_draft_tokens_total");
    c.accepted = CounterValue(text, "vllm:spec_decode_num_accepted_tokens_total");
    if (c.drafts > 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  LOG(INFO) << "drafts " << c.drafts << ", draft tokens " << c.draft_tokens << ", accepted "
            << c.accepted;
  return c;
}

EngineArgs Args(int k) {
  EngineArgs args;
  args.kv_cache_mb = 256;
  args.max_model_len = 512;
  args.max_num_seqs = 20;
  args.max_num_batched_tokens = 512;
  args.speculative_ngram_k = k;
  args.speculative_ngram_pricing = false;  // Drafts by the rule, whatever the load.
  args.speculative_disable_batch_size = 64;  // All 20 running speculate.
  return args;
}

// The default model's greedy outputs without speculation, computed once
// per test process (each draft test compares against them).
const std::vector<std::vector<int32_t>>& PlainOutputs() {
  static const auto* plain = [] {
    auto* out = new std::vector<std::vector<int32_t>>();
    auto e = CreateAsyncLLMEngine(Args(0));
    EXPECT_TRUE(e.ok()) << e.status();
    if (e.ok()) *out = RunAll(e->get(), Prompts());
    return out;
  }();
  return *plain;
}

EngineArgs DraftArgs(const std::string& draft_model, int k) {
  EngineArgs args = Args(0);
  args.speculative_model = draft_model;
  args.speculative_num_draft_tokens = k;
  return args;
}

// A random Llama-family model (tiny dimensions) of `vocab` tokens at
// `path`; `seed` draws its weights.
void WriteTinyModel(const std::string& path, int64_t vocab, uint32_t seed) {
  worker::testing::TinySpec spec;
  spec.vocab = vocab;
  spec.context = 2048;
  std::mt19937 rng(seed);
  ASSERT_TRUE(
      worker::testing::WriteGgufModel(path, spec, worker::testing::RandomModel(spec, &rng)).ok());
}

TEST(SpecDecodeModelTest, GreedyIdenticalWithAndWithoutNgramDrafts) {
  if (!base::DefaultModelFileExists())
    GTEST_SKIP() << "default model not found at " << ResolveModelPath("default");
  const std::vector<std::string> prompts = Prompts();
  const std::vector<std::vector<int32_t>>& plain = PlainOutputs();
  ASSERT_EQ(plain.size(), prompts.size());
  auto e = CreateAsyncLLMEngine(Args(4));
  ASSERT_TRUE(e.ok()) << e.status();
  const std::vector<std::vector<int32_t>> spec = RunAll(e->get(), prompts);
  ASSERT_EQ(spec.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(spec[i].size(), static_cast<size_t>(kTokens)) << i;
    EXPECT_EQ(spec[i], plain[i]) << "prompt " << i << ": " << prompts[i];
  }
  const auto [drafts, draft_tokens, accepted] = ReadSpecCounts(**e);
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

// The default model drafting for itself (k = 4): the same outputs, and
// nearly every draft token accepted (a verified row may differ from the
// draft's single-token row in the last bits, which flips a near tie at
// most). Then a tiny random draft of the same vocabulary: drafts mostly
// rejected, outputs still the same.
TEST(SpecDecodeModelTest, GreedyIdenticalWithDraftModels) {
  if (!base::DefaultModelFileExists())
    GTEST_SKIP() << "default model not found at " << ResolveModelPath("default");
  const std::vector<std::string> prompts = Prompts();
  const std::vector<std::vector<int32_t>>& plain = PlainOutputs();
  ASSERT_EQ(plain.size(), prompts.size());
  int64_t vocab = 0;
  {
    auto e = CreateAsyncLLMEngine(DraftArgs("default", 4));
    ASSERT_TRUE(e.ok()) << e.status();
    vocab = (*e)->GetModelConfig().vocab_size;
    const std::vector<std::vector<int32_t>> spec = RunAll(e->get(), prompts);
    ASSERT_EQ(spec.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(spec[i], plain[i]) << "self draft, prompt " << i << ": " << prompts[i];
    }
    const SpecCounts c = ReadSpecCounts(**e);
    EXPECT_GT(c.drafts, 0);
    EXPECT_GE(c.accepted, 0.9 * c.draft_tokens);
  }
  const std::string tiny = worker::testing::TempDir() + "/tiny_draft.gguf";
  WriteTinyModel(tiny, vocab, 11);
  auto e = CreateAsyncLLMEngine(DraftArgs(tiny, 4));
  ASSERT_TRUE(e.ok()) << e.status();
  const std::vector<std::vector<int32_t>> spec = RunAll(e->get(), prompts);
  ASSERT_EQ(spec.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(spec[i], plain[i]) << "tiny draft, prompt " << i << ": " << prompts[i];
  }
  const SpecCounts c = ReadSpecCounts(**e);
  EXPECT_GT(c.drafts, 0);
  EXPECT_LT(c.accepted, 0.5 * c.draft_tokens);
}

// Over a tiny random target (token prompts, no tokenizer): the target as
// its own draft (nearly all accepted) and another random model of its
// vocabulary give its greedy outputs; a draft of another vocabulary is
// refused at load, naming the option and both sizes.
TEST(SpecDecodeModelTest, TinyModelDraftsAndVocabularyCheck) {
  const std::string dir = worker::testing::TempDir();
  const std::string target = dir + "/tiny_target.gguf";
  const std::string other = dir + "/tiny_other.gguf";
  const std::string wrong_vocab = dir + "/tiny_wrong_vocab.gguf";
  WriteTinyModel(target, 96, 1);
  WriteTinyModel(other, 96, 2);
  WriteTinyModel(wrong_vocab, 128, 3);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t>& p = prompts.emplace_back();
    for (int j = 0; j < 5 + 3 * i; ++j) p.push_back(1 + (j * 7 + i * 13) % 95);
  }
  auto args = [&](const std::string& draft) {
    EngineArgs a = DraftArgs(draft, draft.empty() ? 0 : 4);
    a.model = target;
    a.kv_cache_mb = 16;
    return a;
  };
  std::vector<std::vector<int32_t>> plain;
  {
    auto e = CreateAsyncEngine(args(""));
    ASSERT_TRUE(e.ok()) << e.status();
    plain = RunAll(e->get(), prompts, 48);
  }
  for (const std::string& draft : {target, other}) {
    SCOPED_TRACE(draft);
    auto e = CreateAsyncEngine(args(draft));
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(RunAll(e->get(), prompts, 48), plain);
    const SpecCounts c = ReadSpecCounts(**e);
    EXPECT_GT(c.drafts, 0);
    if (draft == target) {
      EXPECT_GE(c.accepted, 0.8 * c.draft_tokens);
    }
  }
  auto refused = CreateAsyncEngine(args(wrong_vocab));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "speculative_model"))
      << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "128 tokens, the model's 96"))
      << refused.status();
  // The options go together.
  EngineArgs no_k = args(other);
  no_k.speculative_num_draft_tokens = 0;
  auto without_k = CreateAsyncEngine(no_k);
  ASSERT_FALSE(without_k.ok());
  EXPECT_EQ(without_k.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rill::engine
