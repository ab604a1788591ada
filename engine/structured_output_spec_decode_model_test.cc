// Speculative decoding of JSON-schema requests on the real default model:
// with n-gram drafts (verified against each request's grammar) the outputs,
// greedy and seeded at temperature 1, are the tokens the same engine makes
// without speculation, every one satisfies the schema, and drafts were
// accepted (the schema's repeated keys are what n-grams predict). Skips when
// the model is absent.

#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <glog/logging.h>
#include <gtest/gtest.h>
#include <re2/re2.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/json.h"
#include "base/model_dir.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/model_path.h"
#include "engine/stream_drain.h"

namespace rill::engine {
namespace {

using base::json::JsonValue;
using structured_output::ConstraintKind;

// A list of 3 to 5 small records: its keys repeat, so drafts copy them.
constexpr char kSchema[] = R"({"type": "object", "properties": {
    "items": {"type": "array", "minItems": 3, "maxItems": 5, "items": {
        "type": "object", "properties": {
            "name": {"type": "string", "maxLength": 12},
            "count": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["name", "count"], "additionalProperties": false}}},
    "required": ["items"], "additionalProperties": false})";

const char* const kPrompts[] = {
    "List the fruit in the basket as JSON: ",
    "Inventory of the toolbox, as JSON with names and counts: ",
    "The animals on the farm, counted, in JSON: ",
    "Write a shopping list in JSON: ",
};

// Empty when `text` satisfies kSchema; else what is wrong.
std::string SchemaViolation(const std::string& text) {
  absl::StatusOr<JsonValue> v = base::json::ParseJson(text);
  if (!v.ok()) return absl::StrCat("not JSON: ", v.status().ToString());
  const JsonValue* items = v->is_object() ? v->Find("items") : nullptr;
  if (items == nullptr || !items->is_array() || v->object_members().size() != 1) {
    return "not an object with just an items array";
  }
  const size_t n = items->array_items().size();
  if (n < 3 || n > 5) return absl::StrCat(n, " items, not 3 to 5");
  for (const JsonValue& item : items->array_items()) {
    if (!item.is_object() || item.object_members().size() != 2) return "an item is not {name, count}";
    const JsonValue* name = item.Find("name");
    const JsonValue* count = item.Find("count");
    if (name == nullptr || !name->is_string()) return "a name is missing or not a string";
    size_t chars = 0;  // maxLength counts characters, not bytes.
    for (unsigned char c : name->string_value()) chars += (c & 0xC0) != 0x80;
    if (chars > 12) return "a name is longer than 12";
    if (count == nullptr || !count->AsInt64().has_value() ||
        count->number_literal().find_first_of(".eE") != std::string::npos ||
        *count->AsInt64() < 0 || *count->AsInt64() > 99) {
      return "a count is not an integer in [0, 99]";
    }
  }
  return "";
}

std::unique_ptr<AsyncLLMEngine> MakeEngine(int k) {
  EngineArgs args;
  args.max_model_len = 512;
  args.max_num_seqs = 8;
  args.max_num_batched_tokens = 256;
  args.speculative_ngram_k = k;
  args.speculative_ngram_pricing = false;  // Drafts by the rule, whatever the load.
  args.speculative_disable_batch_size = 64;  // All 8 running speculate.
  auto e = CreateAsyncLLMEngine(args);
  CHECK(e.ok()) << e.status();
  return std::move(*e);
}

// Each prompt greedy, then each at temperature 1 with its own seed, all
// submitted at once; the final output of each.
std::vector<CompletionOutput> RunAll(AsyncLLMEngine* e) {
  std::vector<std::shared_ptr<RequestOutputStream>> streams;
  for (int greedy = 1; greedy >= 0; --greedy) {
    for (size_t i = 0; i < std::size(kPrompts); ++i) {
      SamplingParams p;
      p.temperature = greedy ? 0.0f : 1.0f;
      p.seed = 11 + static_cast<int64_t>(i);
      p.max_tokens = 320;
      p.output_kind = OutputKind::kFinalOnly;
      p.constraint = {ConstraintKind::kJsonSchema, kSchema, {}};
      auto s = e->Generate(kPrompts[i], p, absl::StrCat(greedy ? "greedy" : "seeded", i));
      EXPECT_TRUE(s.ok()) << s.status();
      if (s.ok()) streams.push_back(*s);
    }
  }
  std::vector<CompletionOutput> out;
  for (const auto& s : streams) {
    RequestOutput last = engine::testing::LastOutput(*s, absl::Seconds(600));
    EXPECT_TRUE(last.finished) << s->request_id();
    EXPECT_TRUE(last.error.ok()) << s->request_id() << ": " << last.error;
    out.push_back(last.outputs.empty() ? CompletionOutput{} : last.outputs[0]);
  }
  return out;
}

// vllm:spec_decode_num_accepted_tokens_total once the loop published it
// (after its iteration), or -1.
double AcceptedDraftTokens(const AsyncLLMEngine& e) {
  double accepted = -1;
  for (int i = 0; i < 100 && accepted <= 0; ++i) {
    if (i > 0) absl::SleepFor(absl::Milliseconds(20));
    RE2::PartialMatch(e.Metrics().Exposition(),
                      R"(vllm:spec_decode_num_accepted_tokens_total\{[^}]*\} (\S+))", &accepted);
  }
  return accepted;
}

TEST(StructuredOutputSpecDecodeModelTest, JsonSchemaOutputsEqualNonSpeculativeAndAreValid) {
  if (!base::DefaultModelFileExists())
    GTEST_SKIP() << "default model not found at " << ResolveModelPath("default");
  std::vector<CompletionOutput> plain;
  absl::Duration plain_time;
  {
    std::unique_ptr<AsyncLLMEngine> e = MakeEngine(0);
    const absl::Time start = absl::Now();
    plain = RunAll(e.get());
    plain_time = absl::Now() - start;
  }
  std::unique_ptr<AsyncLLMEngine> e = MakeEngine(4);
  const absl::Time start = absl::Now();
  const std::vector<CompletionOutput> spec = RunAll(e.get());
  const absl::Duration spec_time = absl::Now() - start;
  ASSERT_EQ(spec.size(), plain.size());
  for (size_t i = 0; i < spec.size(); ++i) {
    const char* kind = i < std::size(kPrompts) ? "greedy" : "seeded";
    EXPECT_EQ(spec[i].token_ids, plain[i].token_ids)
        << kind << " " << i << ":\n  " << spec[i].text << "\n  " << plain[i].text;
    EXPECT_EQ(spec[i].finish_reason, "stop") << kind << " " << i << ": " << spec[i].text;
    EXPECT_EQ(SchemaViolation(spec[i].text), "") << kind << " " << i << ": " << spec[i].text;
    EXPECT_EQ(SchemaViolation(plain[i].text), "") << kind << " " << i << ": " << plain[i].text;
  }
  const double accepted = AcceptedDraftTokens(*e);
  size_t tokens = 0;
  for (const CompletionOutput& c : spec) tokens += c.token_ids.size();
  LOG(INFO) << tokens << " tokens; accepted draft tokens " << accepted << "; wall time "
            << plain_time << " without speculation, " << spec_time << " with; greedy 0: "
            << spec[0].text;
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace rill::engine
