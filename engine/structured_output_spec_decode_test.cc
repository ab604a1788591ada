// Speculative decoding of constrained requests through EngineCore, with the
// fake executor over a 16-token vocabulary that grammars see as letters and
// punctuation: n-gram drafts are verified against each request's grammar,
// and greedy and seeded outputs (temperature 1) equal those without
// speculation, each still valid for its grammar. Drafts are accepted, so the
// per-position bitmasks and the matcher's rollback were exercised.
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/engine_core.h"
#include "engine/fake_model_executor.h"
#include "engine/spec_decode/spec_decode_config.h"
#include "engine/structured_output/compile_now.h"
#include "engine/structured_output/constraint.h"
#include "engine/structured_output/constraint_matcher.h"
#include "engine/structured_output/grammar_compiler.h"
#include "tests/util/test_seed.h"

namespace rill::engine {
namespace {

using structured_output::CompiledConstraint;
using structured_output::Constraint;
using structured_output::ConstraintKind;
using structured_output::ConstraintMatcher;

constexpr int kVocab = 16;
constexpr int32_t kEos = 0;

// The fake model's ids as text: 0 is EOS; "[", "]" and "1" are what the
// permissive grammar forbids.
const std::vector<std::string> kTokenText = {"",  "a",  "b",  "c", "d", "e", "f", "g",
                                             "h", ",", "ab", "ba", "x", "[", "]", "1"};

std::vector<Constraint> Constraints() {
  return {
      {ConstraintKind::kRegex, "[a-hx,]*", {}},
      {ConstraintKind::kRegex, "\\[([a-h]{1,3},){2,5}[a-h]{1,3}\\]", {}},
      {ConstraintKind::kGrammar, "root ::= \"[\" item (\",\" item)* \"]\"\nitem ::= [a-hx1]+", {}},
  };
}

struct Compiled {
  std::unique_ptr<structured_output::GrammarCompilerPool> pool;
  std::vector<CompiledConstraint> grammars;
};

Compiled CompileAll() {
  Compiled out;
  auto pool = structured_output::GrammarCompilerPool::Create({kTokenText, {kEos}}, {});
  EXPECT_TRUE(pool.ok()) << pool.status();
  if (!pool.ok()) return out;
  out.pool = std::move(*pool);
  for (const Constraint& c : Constraints()) {
    absl::StatusOr<CompiledConstraint> g = structured_output::testing::CompileNow(*out.pool, c);
    EXPECT_TRUE(g.ok()) << c.text << ": " << g.status();
    if (g.ok()) out.grammars.push_back(*g);
  }
  return out;
}

struct Outputs {
  std::map<std::string, std::vector<int32_t>> tokens;
  std::map<std::string, RequestState> state;
  std::map<std::string, size_t> grammar_of;
  spec_decode::SpecDecodeStats spec;
};

// Four requests per grammar, all running at once: plain, ignore_eos,
// min_tokens and a stop token, with speculation of up to `k` tokens.
Outputs RunAll(const Compiled& compiled, int k, SamplingParams base, uint64_t seed0) {
  FakeModelExecutor::Options o;
  o.num_blocks = 512;
  o.block_size = 4;
  o.vocab_size = kVocab;
  o.context_window = 2;  // Greedy outputs cycle, so drafts get accepted.
  FakeModelExecutor fake(o);
  SchedulerConfig sched;
  sched.max_num_seqs = 16;
  sched.max_num_batched_tokens = 96;
  sched.max_model_len = 256;
  EngineCore core(&fake, sched, /*enable_prefix_caching=*/true);
  spec_decode::SpecDecodeConfig spec;
  spec.ngram_k = k;
  spec.disable_batch_size = 64;
  spec.price_ngram_drafts = false;  // Drafts by the rule, whatever the load.
  core.SetSpeculation(spec);
  const std::vector<Constraint> constraints = Constraints();
  Outputs out;
  for (size_t g = 0; g < compiled.grammars.size(); ++g) {
    for (int v = 0; v < 4; ++v) {
      const std::string id = absl::StrCat("g", g, "v", v);
      SamplingParams p = base;
      p.max_tokens = 48;
      p.seed = seed0 + g * 4 + v;
      p.constraint = constraints[g];
      p.ignore_eos = v == 1;
      if (v == 2) p.min_tokens = 6;
      if (v == 3) p.stop_token_ids = {9};  // ","
      std::vector<int32_t> prompt(8 + v);
      for (size_t j = 0; j < prompt.size(); ++j) prompt[j] = 1 + (j * 5 + g * 7 + v * 3) % 15;
      auto r = std::make_unique<Request>(id, prompt, p);
      r->times.arrival = absl::Now();
      r->matcher = std::make_shared<ConstraintMatcher>(compiled.grammars[g]);
      EXPECT_TRUE(core.AddRequest(std::move(r)).ok()) << id;
      out.grammar_of[id] = g;
    }
  }
  for (int step = 0; step < 5000 && core.HasUnfinished(); ++step) {
    absl::StatusOr<std::vector<EngineCoreOutput>> outs = core.Step();
    EXPECT_TRUE(outs.ok()) << outs.status();
    if (!outs.ok()) break;
    for (const EngineCoreOutput& e : *outs) {
      EXPECT_TRUE(e.error.ok()) << e.request_id << ": " << e.error;
      auto& t = out.tokens[e.request_id];
      t.insert(t.end(), e.new_token_ids.begin(), e.new_token_ids.end());
      if (e.finished()) out.state[e.request_id] = e.state;
    }
  }
  EXPECT_FALSE(core.HasUnfinished());
  EXPECT_EQ(core.block_manager().num_free_blocks(), 512);
  out.spec = core.spec_stats();
  return out;
}

// Every output follows its grammar; one that stopped at EOS completed it.
void ExpectValid(const Compiled& compiled, const Outputs& out) {
  for (const auto& [id, tokens] : out.tokens) {
    ConstraintMatcher m(compiled.grammars[out.grammar_of.at(id)]);
    EXPECT_TRUE(m.Sync(tokens).ok()) << id;
    const RequestState state = out.state.at(id);
    EXPECT_NE(state, RequestState::kFinishedError) << id;
    if (state == RequestState::kFinishedStopped && !tokens.empty() && tokens.back() == kEos) {
      EXPECT_TRUE(m.IsTerminated()) << id;
    }
  }
}

void ExpectSpeculationChangesNothing(const SamplingParams& params, uint64_t seed0) {
  const Compiled compiled = CompileAll();
  ASSERT_EQ(compiled.grammars.size(), Constraints().size());
  const Outputs plain = RunAll(compiled, 0, params, seed0);
  const Outputs spec = RunAll(compiled, 4, params, seed0);
  std::cout << "drafts " << spec.spec.num_drafts << ", draft tokens " << spec.spec.num_draft_tokens
            << ", accepted " << spec.spec.num_accepted_tokens << "\n";
  EXPECT_GT(spec.spec.num_drafts, 0);
  EXPECT_GT(spec.spec.num_accepted_tokens, 0);
  EXPECT_EQ(plain.spec.num_drafts, 0);
  ASSERT_EQ(spec.tokens.size(), plain.tokens.size());
  for (const auto& [id, tokens] : plain.tokens) {
    EXPECT_EQ(spec.tokens.at(id), tokens) << id;
    EXPECT_EQ(spec.state.at(id), plain.state.at(id)) << id;
  }
  ExpectValid(compiled, plain);
  ExpectValid(compiled, spec);
}

TEST(StructuredOutputSpecDecodeTest, GreedyOutputsEqualNonSpeculativeAndStayValid) {
  SamplingParams p;
  p.temperature = 0.0f;
  ExpectSpeculationChangesNothing(p, 0);
}

TEST(StructuredOutputSpecDecodeTest, SeededTemperatureOneEqualsNonSpeculativeAndStaysValid) {
  const uint64_t seed = tests::util::StreamSeed(0);
  std::cout << "seed " << seed << "\n";
  SamplingParams p;
  p.temperature = 1.0f;
  p.repetition_penalty = 1.1f;  // Penalties see the draft tokens accepted before a position.
  ExpectSpeculationChangesNothing(p, seed * 100);
}

}  // namespace
}  // namespace rill::engine
