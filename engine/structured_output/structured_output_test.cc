// The glue between Rill and xgrammar over a tiny vocabulary: masks, EOS only
// where the grammar ends, rollback, compile errors, limits, cache, timeout.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "engine/structured_output/compile_now.h"
#include "engine/structured_output/constraint.h"
#include "engine/structured_output/constraint_matcher.h"
#include "engine/structured_output/grammar_compiler.h"

namespace rill::engine::structured_output {
namespace {

using testing::CompileNow;

// id 0 is EOS (""), then single letters and one multi-letter token.
const std::vector<std::string> kTokens = {"", "y", "e", "s", "n", "o", "yes", "x", "1", "2", "+"};
constexpr int kEos = 0;

GrammarVocabulary Vocab() { return {kTokens, {kEos}}; }

std::unique_ptr<GrammarCompilerPool> Pool(GrammarCompilerOptions options = {}) {
  absl::StatusOr<std::unique_ptr<GrammarCompilerPool>> pool =
      GrammarCompilerPool::Create(Vocab(), options);
  EXPECT_TRUE(pool.ok()) << pool.status();
  return std::move(*pool);
}

// Token ids whose logits survive bitmask row `row` of the last fill.
std::vector<int> AllowedByRow(const ConstraintMatcher& m, int row,
                              int64_t width = kTokens.size()) {
  std::vector<float> logits(width, 1.0f);
  m.ApplyBitmask(logits.data(), width, row);
  std::vector<int> ids;
  for (int64_t i = 0; i < width; ++i) {
    if (!std::isinf(logits[i])) ids.push_back(static_cast<int>(i));
  }
  return ids;
}

// Token ids whose logits survive the mask.
std::vector<int> Allowed(ConstraintMatcher& m, int64_t width = kTokens.size()) {
  m.FillBitmask();
  return AllowedByRow(m, 0, width);
}

Constraint Choice(std::vector<std::string> choices) {
  Constraint c;
  c.kind = ConstraintKind::kChoice;
  c.choices = std::move(choices);
  return c;
}

// The grammar of choice {"yes", "no"} (its compiler may go: the grammar keeps
// what it needs).
CompiledConstraint YesNo() {
  auto pool = Pool();
  absl::StatusOr<CompiledConstraint> g = CompileNow(*pool, Choice({"yes", "no"}));
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

// The grammar of a regex or EBNF text.
CompiledConstraint CompileText(ConstraintKind kind, const std::string& text) {
  auto pool = Pool();
  Constraint c;
  c.kind = kind;
  c.text = text;
  absl::StatusOr<CompiledConstraint> g = CompileNow(*pool, c);
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

// num ("+" num)* over the digits 1 and 2.
CompiledConstraint Arithmetic() {
  return CompileText(ConstraintKind::kGrammar, "root ::= num (\"+\" num)*\nnum ::= [12]+");
}

TEST(ConstraintMatcherTest, ChoiceMasksAndAllowsEosOnlyAtTheEnd) {
  ConstraintMatcher m(YesNo());
  EXPECT_EQ(Allowed(m), (std::vector<int>{1, 4, 6}));  // y, n, yes
  ASSERT_TRUE(m.Sync({1, 2}).ok());                    // "ye"
  EXPECT_EQ(Allowed(m), (std::vector<int>{3}));        // s
  ASSERT_TRUE(m.Sync({1, 2, 3}).ok());
  EXPECT_EQ(Allowed(m), (std::vector<int>{kEos}));
}

TEST(ConstraintMatcherTest, AfterEosOnlyEosStaysAllowed) {
  // A sample with ignore_eos goes on after the grammar ended.
  ConstraintMatcher m(YesNo());
  ASSERT_TRUE(m.Sync({6, kEos}).ok());
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_EQ(Allowed(m), (std::vector<int>{kEos}));
  ASSERT_TRUE(m.Sync({6, kEos, kEos, kEos}).ok());
  EXPECT_EQ(Allowed(m), (std::vector<int>{kEos}));
}

TEST(ConstraintMatcherTest, SyncRollsBackToTheOutputsItIsGiven) {
  ConstraintMatcher m(YesNo());
  ASSERT_TRUE(m.Sync({1, 2}).ok());
  ASSERT_TRUE(m.Sync({4}).ok());  // Recomputed with different outputs: "n".
  EXPECT_EQ(m.num_accepted(), 1);
  EXPECT_EQ(Allowed(m), (std::vector<int>{5}));  // o
  ASSERT_TRUE(m.Sync({}).ok());
  EXPECT_EQ(Allowed(m), (std::vector<int>{1, 4, 6}));
}

TEST(ConstraintMatcherTest, ATokenOutsideTheGrammarIsAnError) {
  ConstraintMatcher m(YesNo());
  absl::Status s = m.Sync({7});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
}

TEST(ConstraintMatcherTest, IdsPastTheGrammarVocabularyAreMasked) {
  ConstraintMatcher m(CompileText(ConstraintKind::kRegex, "x+"));
  EXPECT_EQ(Allowed(m, kTokens.size() + 40), (std::vector<int>{7}));
  ASSERT_TRUE(m.Sync({7}).ok());
  EXPECT_EQ(Allowed(m), (std::vector<int>{kEos, 7}));
}

TEST(ConstraintMatcherTest, ArithmeticGrammar) {
  ConstraintMatcher m(Arithmetic());
  EXPECT_EQ(Allowed(m), (std::vector<int>{8, 9}));
  ASSERT_TRUE(m.Sync({8, 10}).ok());  // "1+"
  EXPECT_EQ(Allowed(m), (std::vector<int>{8, 9}));
  ASSERT_TRUE(m.Sync({8, 10, 9}).ok());
  EXPECT_EQ(Allowed(m), (std::vector<int>{kEos, 8, 9, 10}));
}

TEST(ConstraintMatcherTest, DraftsEndAtTheFirstRejectedTokenAndLeaveTheMatcherAsItWas) {
  ConstraintMatcher m(YesNo());
  // "y" "e" "s" EOS: accepted through the EOS that ends the grammar, nothing after it.
  EXPECT_EQ(m.AcceptablePrefix(std::vector<int32_t>{1, 2, 3, kEos, 1}), 4);
  EXPECT_EQ(m.AcceptablePrefix(std::vector<int32_t>{1, 5, 2}), 1);  // "y" then "o" breaks it.
  EXPECT_EQ(m.AcceptablePrefix(std::vector<int32_t>{7}), 0);
  EXPECT_EQ(m.AcceptablePrefix(std::vector<int32_t>{}), 0);
  EXPECT_EQ(m.num_accepted(), 0);
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_EQ(Allowed(m), (std::vector<int>{1, 4, 6}));
  ASSERT_TRUE(m.Sync({4}).ok());
  EXPECT_EQ(m.AcceptablePrefix(std::vector<int32_t>{5, kEos}), 2);
  EXPECT_EQ(Allowed(m), (std::vector<int>{5}));
}

TEST(ConstraintMatcherTest, DraftBitmasksAreTheMasksOfEachPrefixAndSyncRollsBack) {
  const CompiledConstraint g = Arithmetic();
  // Row j of a draft's fill is what a matcher that took draft[0, j) one
  // token at a time allows.
  const std::vector<int32_t> outputs = {8};  // "1"
  const std::vector<int32_t> draft = {10, 9, 9, 10, 8, kEos};  // "+22+1" EOS
  ConstraintMatcher m(g);
  ASSERT_TRUE(m.Sync(outputs).ok());
  m.FillBitmasks(draft);
  EXPECT_EQ(m.num_accepted(), 7);  // It stands after the draft.
  EXPECT_TRUE(m.IsTerminated());
  for (size_t j = 0; j <= draft.size(); ++j) {
    ConstraintMatcher one(g);
    std::vector<int32_t> prefix = outputs;
    prefix.insert(prefix.end(), draft.begin(), draft.begin() + j);
    ASSERT_TRUE(one.Sync(prefix).ok());
    EXPECT_EQ(AllowedByRow(m, static_cast<int>(j)), Allowed(one)) << "row " << j;
  }
  // Verification accepted "+2" and sampled "+" instead of the second "2":
  // the Sync with those outputs rolls the rest back, ending included.
  ASSERT_TRUE(m.Sync({8, 10, 9, 10}).ok());
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_EQ(m.num_accepted(), 4);
  EXPECT_EQ(Allowed(m), (std::vector<int>{8, 9}));
  // A draft token the grammar rejects leaves the rows after it allowing
  // nothing (verification stops at the row before, which forbids it).
  m.FillBitmasks(std::vector<int32_t>{9, 10, 10});  // "2++"
  EXPECT_EQ(m.num_accepted(), 6);
  EXPECT_EQ(AllowedByRow(m, 2), (std::vector<int>{8, 9}));
  EXPECT_TRUE(AllowedByRow(m, 3).empty());
}

TEST(ConstraintMatcherTest, StructuralTagSequence) {
  auto pool = Pool();
  Constraint c;
  c.kind = ConstraintKind::kStructuralTag;
  c.text = R"({"type": "structural_tag", "format": {"type": "sequence", "elements": [
      {"type": "const_string", "value": "y"}, {"type": "regex", "pattern": "[12]+"}]}})";
  absl::StatusOr<CompiledConstraint> g = CompileNow(*pool, c);
  ASSERT_TRUE(g.ok()) << g.status();
  ConstraintMatcher m(*g);
  EXPECT_EQ(Allowed(m), (std::vector<int>{1}));
  ASSERT_TRUE(m.Sync({1}).ok());
  EXPECT_EQ(Allowed(m), (std::vector<int>{8, 9}));
  c.text = R"({"type": "structural_tag", "format": {"type": "no_such_format"}})";
  absl::StatusOr<CompiledConstraint> bad = CompileNow(*pool, c);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_NE(bad.status().message().find("structural_tag"), std::string::npos) << bad.status();
}

// Speculation as the engine runs it (a draft cut by AcceptablePrefix, one
// mask row per position from FillBitmasks, a prefix of the draft kept and a
// different token sampled after it, then Sync) against a matcher that takes
// one token at a time: every mask the same, on grammars with token and
// character budgets (which a mask computation decides and the next accepted
// token commits) and multi-token end strings. Random drafts and samples,
// fixed seeds.
TEST(ConstraintMatcherTest, SpeculationMasksEqualOneTokenAtATime) {
  auto pool = Pool();
  const std::vector<std::string> formats = {
      R"({"type": "tag", "begin": "y", "content": {"type": "any_text", "max_tokens": 2}, "end": "s"})",
      R"({"type": "tag", "begin": "y", "content": {"type": "any_text", "max_tokens": 1}, "end": "no"})",
      R"({"type": "tag", "begin": "x", "content": {"type": "any_text", "max_tokens": 3,
          "excludes": ["+"]}, "end": "+1"})",
      R"({"type": "tag", "begin": "y", "content": {"type": "any_text", "max_chars": 3}, "end": "es"})",
      R"({"type": "sequence", "elements": [
          {"type": "tag", "begin": "y", "content": {"type": "any_text", "max_tokens": 2}, "end": "s"},
          {"type": "regex", "pattern": "[12]+"}]})",
  };
  int steps = 0, rejected = 0;
  for (size_t f = 0; f < formats.size(); ++f) {
    Constraint c;
    c.kind = ConstraintKind::kStructuralTag;
    c.text = R"({"type": "structural_tag", "format": )" + formats[f] + "}";
    absl::StatusOr<CompiledConstraint> g = CompileNow(*pool, c);
    ASSERT_TRUE(g.ok()) << formats[f] << ": " << g.status();
    for (uint32_t seed = 0; seed < 60; ++seed) {
      std::mt19937 rng(seed * 7919 + static_cast<uint32_t>(f));
      ConstraintMatcher one(*g), spec(*g);
      std::vector<int32_t> outputs;
      while (outputs.size() < 10 && !one.IsTerminated()) {
        std::vector<int32_t> draft(rng() % 4);
        for (int32_t& t : draft) t = static_cast<int32_t>(rng() % kTokens.size());
        ASSERT_TRUE(spec.Sync(outputs).ok());
        draft.resize(spec.AcceptablePrefix(draft));
        spec.FillBitmasks(draft);
        for (size_t j = 0; j <= draft.size(); ++j) {
          const std::vector<int> allowed = Allowed(one);
          ASSERT_EQ(AllowedByRow(spec, static_cast<int>(j)), allowed)
              << formats[f] << " seed " << seed << " after " << outputs.size() << " tokens";
          ASSERT_FALSE(allowed.empty());
          int32_t token;
          // A draft token the mask forbids (a budget spent: AcceptablePrefix
          // sees no masks) cannot be sampled, so verification rejects it.
          const bool maskable =
              j < draft.size() && std::count(allowed.begin(), allowed.end(), draft[j]) > 0;
          if (maskable && rng() % 3 != 0) {
            token = draft[j];  // accepted
          } else {
            token = allowed[rng() % allowed.size()];
            if (j < draft.size() && token == draft[j]) token = allowed[0];
          }
          outputs.push_back(token);
          const absl::Status st = one.Sync(outputs);
          std::string text;
          for (int32_t t : outputs) text += "[" + kTokens[t] + "]";
          ASSERT_TRUE(st.ok()) << formats[f] << " seed " << seed << " " << text << ": " << st;
          ++steps;
          if (j == draft.size() || token != draft[j] || one.IsTerminated()) {
            rejected += j < draft.size();
            break;
          }
        }
      }
      ASSERT_TRUE(spec.Sync(outputs).ok());
      if (!one.IsTerminated()) {
        EXPECT_EQ(Allowed(spec), Allowed(one)) << formats[f] << " seed " << seed << " at the end";
      }
    }
  }
  EXPECT_GT(rejected, 100);  // the rollbacks were exercised
  EXPECT_GT(steps, 1000);
}

TEST(GrammarCompilerPoolTest, BadConstraintsAreInvalidArgumentNamingTheProblem) {
  auto pool = Pool();
  struct Case {
    ConstraintKind kind;
    std::string text;
    std::string want;  // In the message.
  };
  for (const Case& t : std::vector<Case>{
           {ConstraintKind::kRegex, "(ab", "regex: Regex parsing error at position 4: The parenthesis is not closed"},
           {ConstraintKind::kGrammar, "root ::= \"a\" |", "grammar"},
           {ConstraintKind::kGrammar, "start ::= \"a\"", "root"},
           {ConstraintKind::kJsonSchema, "{\"type\": ", "json_schema"},
           {ConstraintKind::kJsonSchema, "{\"type\": \"no-such-type\"}", "json_schema"},
       }) {
    Constraint c;
    c.kind = t.kind;
    c.text = t.text;
    absl::StatusOr<CompiledConstraint> g = CompileNow(*pool, c);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << t.text << ": " << g.status();
    EXPECT_NE(g.status().message().find(t.want), std::string::npos) << g.status();
    // xgrammar's log prefix (time, source file and line) is not the client's business.
    EXPECT_EQ(g.status().message().find(".cc:"), std::string::npos) << g.status();
  }
  absl::StatusOr<CompiledConstraint> empty = CompileNow(*pool, Choice({}));
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("choice list is empty"), std::string::npos);
}

TEST(GrammarCompilerPoolTest, LimitsAreNamed) {
  GrammarCompilerOptions options;
  options.limits.max_bytes = 8;
  options.limits.max_json_depth = 2;
  auto pool = Pool(options);
  Constraint big = Choice({"yes", "no", "yesyes"});
  absl::StatusOr<CompiledConstraint> g = CompileNow(*pool, big);
  EXPECT_NE(g.status().message().find("structured_output_max_bytes=8"), std::string::npos)
      << g.status();
  Constraint deep;
  deep.kind = ConstraintKind::kJsonSchema;
  deep.text = "{\"a\":[{}]}";
  options.limits.max_bytes = 1000;
  EXPECT_EQ(JsonNestingDepth(deep.text), 3);
  EXPECT_EQ(JsonNestingDepth("{\"a\": \"[[[{\"}"), 1);  // Brackets in strings do not count.
  auto pool2 = Pool(options);
  g = CompileNow(*pool2, deep);
  EXPECT_NE(g.status().message().find("structured_output_max_json_depth=2"), std::string::npos)
      << g.status();
}

TEST(GrammarCompilerPoolTest, CachesByConstraint) {
  auto pool = Pool();
  ASSERT_TRUE(CompileNow(*pool, Choice({"yes", "no"})).ok());
  ASSERT_TRUE(CompileNow(*pool, Choice({"yes", "no"})).ok());
  EXPECT_EQ(pool->num_compiled(), 1);
  ASSERT_TRUE(CompileNow(*pool, Choice({"no", "yes"})).ok());
  EXPECT_EQ(pool->num_compiled(), 2);
  Constraint bad;
  bad.kind = ConstraintKind::kRegex;
  bad.text = "(";
  EXPECT_FALSE(CompileNow(*pool, bad).ok());
  EXPECT_FALSE(CompileNow(*pool, bad).ok());
  EXPECT_EQ(pool->num_compiled(), 3);  // Errors are cached too.
}

TEST(GrammarCompilerPoolTest, TimeoutIsInvalidArgumentNamingTheLimit) {
  GrammarCompilerOptions options;
  options.timeout = absl::Milliseconds(1);
  auto pool = Pool(options);
  // Occupy the only compile thread with many slow-ish grammars, so the last
  // one waits past its deadline.
  std::vector<std::string> many;
  for (int i = 0; i < 3000; ++i) many.push_back("choice" + std::to_string(i));
  std::vector<std::unique_ptr<absl::Notification>> dones;
  std::vector<absl::Status> results(20);
  for (int i = 0; i < 20; ++i) {
    dones.push_back(std::make_unique<absl::Notification>());
    many[0] = "first" + std::to_string(i);  // Distinct, so nothing is cached.
    pool->Compile(Choice(many), [&, i](absl::StatusOr<CompiledConstraint> r) {
      results[i] = r.status();
      dones[i]->Notify();
    });
  }
  for (auto& d : dones) d->WaitForNotification();
  EXPECT_EQ(results.back().code(), absl::StatusCode::kInvalidArgument) << results.back();
  EXPECT_NE(results.back().message().find("structured_output_compile_timeout"), std::string::npos)
      << results.back();
}

TEST(ChoiceGrammarTest, EscapesQuotesBackslashesAndControlBytes) {
  EXPECT_EQ(ChoiceGrammar({"a\"b", "c\\d", "e\nf"}),
            "root ::= \"a\\\"b\" | \"c\\\\d\" | \"e\\x0af\"");
}

}  // namespace
}  // namespace rill::engine::structured_output
