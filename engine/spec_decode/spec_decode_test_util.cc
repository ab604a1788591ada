#include "engine/spec_decode/spec_decode_test_util.h"

#include <cmath>
#include <iostream>
#include <random>
#include <utility>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/util/test_seed.h"

namespace rill::engine::spec_decode::testing {

SpecDecodeConfig NgramSpec(int k) {
  SpecDecodeConfig c;
  c.ngram_k = k;
  c.ngram_min_n = 1;
  c.ngram_max_n = 3;
  c.disable_batch_size = 64;
  // Draft lengths by the rule, not priced with measured step times: these
  // tests need drafts run for run whatever the machine's load (pricing has
  // its own test with the fake model's step delays).
  c.price_ngram_drafts = false;
  return c;
}

SpecDecodeConfig DraftModelSpec(int k) {
  SpecDecodeConfig c;
  c.num_draft_tokens = k;
  c.disable_batch_size = 64;
  return c;
}

SchedulerConfig Sched(int budget) {
  SchedulerConfig c;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = budget;
  c.max_model_len = 256;
  return c;
}

SamplingParams Greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

std::vector<int32_t> Prompt(int n, int32_t salt, int vocab) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = 1 + (i * 7 + salt * 13) % (vocab - 1);
  return v;
}

std::unique_ptr<Request> MakeRequest(const std::string& id, std::vector<int32_t> prompt,
                                     const SamplingParams& params) {
  auto r = std::make_unique<Request>(id, std::move(prompt), params);
  r->times.arrival = absl::Now();
  return r;
}

FakeModelExecutor::Options Cyclic(int num_blocks) {
  FakeModelExecutor::Options o;
  o.num_blocks = num_blocks;
  o.block_size = 4;
  o.vocab_size = 16;
  o.context_window = 2;  // Greedy outputs cycle: drafts get accepted.
  return o;
}

void Driver::Collect(const std::vector<EngineCoreOutput>& outs) {
  for (const EngineCoreOutput& o : outs) {
    auto& t = tokens[o.request_id];
    t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    if (o.finished()) {
      state[o.request_id] = o.state;
      preemptions += o.num_preemptions;
    }
  }
}

void Driver::Step(EngineCore* core) {
  absl::StatusOr<std::vector<EngineCoreOutput>> outs = core->Step();
  ASSERT_TRUE(outs.ok()) << outs.status();
  Collect(*outs);
  BlockManager& blocks = core->block_manager();
  for (const std::string& id : core->scheduler().UnfinishedIds()) {
    const Request* r = core->scheduler().Find(id);
    EXPECT_LE(static_cast<int64_t>(blocks.BlockTable(r->seq_no).size()),
              blocks.BlocksFor(r->num_tokens()))
        << id << " holds blocks past its tokens";
  }
}

void Driver::ToCompletion(EngineCore* core) {
  for (int i = 0; i < 20000 && core->HasUnfinished(); ++i) {
    Step(core);
    if (::testing::Test::HasFatalFailure()) return;
  }
  ASSERT_FALSE(core->HasUnfinished());
  Collect(core->TakePendingOutputs());
}

MarkovExecutor::MarkovExecutor(uint32_t matrix_seed) {
  config_.architecture = "markov";
  config_.vocab_size = kVocab;
  config_.max_position_embeddings = 512;
  config_.eos_token_id = 0;
  config_.eos_token_ids = {0};
  std::mt19937 rng(matrix_seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int a = 0; a < kVocab; ++a) {
    double sum = 0;
    for (int b = 0; b < kVocab; ++b) sum += (p_[a][b] = 0.02 + u(rng) * u(rng));
    for (int b = 0; b < kVocab; ++b) p_[a][b] /= sum;
  }
}

absl::Status MarkovExecutor::Execute(const worker::ForwardBatch& batch,
                                     worker::ForwardOutput* out) {
  out->logits.clear();
  for (const worker::SequenceChunk& s : batch.sequences) {
    const size_t first = s.all_logits ? 0 : s.tokens.size() - 1;
    std::vector<float>& rows = out->logits.emplace_back();
    for (size_t j = first; j < s.tokens.size(); ++j) {
      for (int b = 0; b < kVocab; ++b) rows.push_back(std::log(p_[s.tokens[j]][b]));
    }
  }
  return absl::OkStatus();
}

std::map<std::string, std::vector<int32_t>> RunMarkov(const SpecDecodeConfig& spec,
                                                      const SamplingParams& base, int requests,
                                                      uint64_t seed0, int64_t* accepted,
                                                      std::unique_ptr<ModelExecutor> draft) {
  MarkovExecutor model;
  if (draft != nullptr) model.AttachDraftModel(std::move(draft));
  EngineCore core(&model, Sched(256), true);
  core.SetSpeculation(spec);
  Driver run;
  for (int i = 0; i < requests; ++i) {
    SamplingParams p = base;
    p.seed = seed0 + i;
    const std::vector<int32_t> prompt = {1, 2, 3, 1, 2, 3, 4, 1, 2};
    EXPECT_TRUE(core.AddRequest(MakeRequest(absl::StrCat("s", i), prompt, p)).ok());
    if (i % 16 == 15) run.ToCompletion(&core);
  }
  run.ToCompletion(&core);
  if (accepted != nullptr) *accepted = core.spec_stats().num_accepted_tokens;
  return run.tokens;
}

double MarkovChiSquare(const std::map<std::string, std::vector<int32_t>>& outs, int64_t* total) {
  const MarkovExecutor model;
  constexpr int V = MarkovExecutor::kVocab;
  std::vector<std::vector<int64_t>> counts(V, std::vector<int64_t>(V, 0));
  *total = 0;
  for (const auto& [id, tokens] : outs) {
    int prev = 2;  // The prompt's last token.
    for (int32_t t : tokens) {
      ++counts[prev][t];
      prev = t;
      ++*total;
    }
  }
  double chi2 = 0.0;
  for (int a = 0; a < V; ++a) {
    int64_t n = 0;
    for (int b = 0; b < V; ++b) n += counts[a][b];
    for (int b = 0; b < V; ++b) {
      const double expected = n * model.P(a, b);
      if (expected > 0) chi2 += (counts[a][b] - expected) * (counts[a][b] - expected) / expected;
    }
  }
  return chi2;
}

void RunWithAbortsAfterAcceptedDrafts(const FakeModelExecutor& model, EngineCore* core,
                                      const std::function<void()>& check) {
  std::map<std::string, std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    const std::string id = absl::StrCat("r", i);
    prompts[id] = Prompt(8, i, 16);
    ASSERT_TRUE(core->AddRequest(MakeRequest(id, prompts[id], Greedy(40))).ok());
  }
  Driver run;
  std::vector<std::string> aborted;
  for (int step = 0; step < 20000 && core->HasUnfinished(); ++step) {
    const int64_t accepted_before = core->spec_stats().num_accepted_tokens;
    run.Step(core);
    if (::testing::Test::HasFatalFailure()) return;
    check();
    if (core->spec_stats().num_accepted_tokens > accepted_before && aborted.size() < 2) {
      const std::string id = aborted.empty() ? "r1" : "r4";
      if (core->AbortRequest(id).ok()) aborted.push_back(id);
      check();
    }
  }
  ASSERT_FALSE(core->HasUnfinished());
  run.Collect(core->TakePendingOutputs());
  EXPECT_EQ(aborted.size(), 2u);
  EXPECT_GT(run.preemptions, 0);
  EXPECT_GT(core->spec_stats().num_accepted_tokens, 0);
  for (const auto& [id, prompt] : prompts) {
    if (run.state[id] == RequestState::kFinishedAborted) continue;
    EXPECT_EQ(run.tokens[id], model.Generate(prompt, 40)) << id;
  }
}

void ExpectSeededSamplingUnchanged(const SamplingParams& p, const SpecDecodeConfig& spec,
                                   std::unique_ptr<ModelExecutor> draft) {
  int64_t accepted = 0;
  const auto plain = RunMarkov(NgramSpec(0), p, 32, 100, nullptr);
  const auto speculative = RunMarkov(spec, p, 32, 100, &accepted, std::move(draft));
  EXPECT_GT(accepted, 0);
  EXPECT_EQ(speculative, plain);
}

void ExpectTemperatureOneMatchesMarkov(const SpecDecodeConfig& spec,
                                       std::unique_ptr<ModelExecutor> draft, float min_p) {
  const uint64_t seed = rill::tests::util::StreamSeed(0);
  std::cout << "seed " << seed << "\n";
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = min_p;
  p.max_tokens = 64;
  p.ignore_eos = true;
  int64_t accepted = 0;
  const auto outs = RunMarkov(spec, p, 320, seed * 1000, &accepted, std::move(draft));
  int64_t total = 0;
  const double chi2 = MarkovChiSquare(outs, &total);
  ASSERT_EQ(total, 320 * 64);
  std::cout << "chi-square " << chi2 << " (30 dof), accepted draft tokens " << accepted
            << " of " << total << " outputs\n";
  EXPECT_GT(accepted, 200);  // Drafts were accepted, so the check means something.
  EXPECT_LT(chi2, 67.6);
}

}  // namespace rill::engine::spec_decode::testing
