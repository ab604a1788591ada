// Structured outputs under LoRA (issue 30): on the real default model with a
// small random PEFT adapter, one batch holds a JSON-schema-constrained
// request with the adapter, an unconstrained request with the adapter and a
// constrained request on the base model. Both constrained outputs must parse
// and satisfy the schema and end with "stop"; the unconstrained adapter
// request must produce exactly the tokens it produces alone, and its text
// (same prompt, same adapter) must not satisfy the schema, so the
// constrained adapter row really was masked. Skips when the model is absent.

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/json.h"
#include "base/model_dir.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/model_path.h"
#include "engine/stream_drain.h"
#include "worker/lora/lora_test_util.h"

namespace rill::engine {
namespace {

namespace wt = rill::worker::testing;
using base::json::JsonValue;
using structured_output::ConstraintKind;

constexpr char kSchema[] = R"({"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 10},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "city": {"enum": ["Paris", "Rome", "Berlin"]}},
    "required": ["name", "age", "city"], "additionalProperties": false})";
constexpr char kPrompt[] = "Describe a person as JSON with a name, an age and a city: ";
constexpr int kFreeTokens = 24;

SamplingParams Constrained() {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 64;
  p.output_kind = OutputKind::kFinalOnly;
  p.constraint = {ConstraintKind::kJsonSchema, kSchema, {}};
  return p;
}

SamplingParams Free() {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = kFreeTokens;
  p.ignore_eos = true;
  p.output_kind = OutputKind::kFinalOnly;
  return p;
}

CompletionOutput Collect(const std::shared_ptr<RequestOutputStream>& stream) {
  RequestOutput last = engine::testing::LastOutput(*stream, absl::Seconds(300));
  EXPECT_TRUE(last.finished) << stream->request_id();
  EXPECT_TRUE(last.error.ok()) << stream->request_id() << ": " << last.error;
  return last.outputs.empty() ? CompletionOutput{} : last.outputs[0];
}

std::shared_ptr<RequestOutputStream> Submit(AsyncLLMEngine* e, const SamplingParams& p,
                                            const std::string& id, const std::string& lora) {
  auto s = e->Generate(kPrompt, p, id, 0, absl::InfinitePast(), lora);
  EXPECT_TRUE(s.ok()) << id << ": " << s.status();
  return s.ok() ? *s : nullptr;
}

// Empty when `text` is a JSON object with exactly the schema's keys, each of
// the right type and range; else what is wrong.
std::string SchemaViolation(const std::string& text) {
  absl::StatusOr<JsonValue> v = base::json::ParseJson(text);
  if (!v.ok()) return absl::StrCat("not JSON: ", v.status().ToString());
  if (!v->is_object()) return "not an object";
  if (v->object_members().size() != 3) return "not exactly the three properties";
  const JsonValue* name = v->Find("name");
  if (name == nullptr || !name->is_string()) return "name missing or not a string";
  // maxLength counts characters; the model may write non-ASCII ones.
  size_t chars = 0;
  for (unsigned char c : name->string_value()) chars += (c & 0xC0) != 0x80;
  if (chars > 10) return "name longer than 10";
  const JsonValue* age = v->Find("age");
  if (age == nullptr || !age->AsInt64().has_value() ||
      age->number_literal().find_first_of(".eE") != std::string::npos) {
    return "age missing or not an integer";
  }
  if (*age->AsInt64() < 0 || *age->AsInt64() > 120) return "age out of [0, 120]";
  const JsonValue* city = v->Find("city");
  if (city == nullptr || !city->is_string()) return "city missing or not a string";
  const std::string& c = city->string_value();
  if (c != "Paris" && c != "Rome" && c != "Berlin") return "city not in the enum";
  return "";
}

TEST(StructuredOutputLoraEngineTest, ConstrainedAdapterRowsAreMaskedInAMixedBatch) {
  if (!base::DefaultModelFileExists())
    GTEST_SKIP() << "default model not found at " << ResolveModelPath("default");
  const std::string root = wt::TempDir() + "/so_lora_root";
  std::filesystem::create_directories(root);
  EngineArgs args;
  args.threads = 2;
  args.lora_root = root;
  auto created = CreateAsyncLLMEngine(args);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<AsyncLLMEngine> e = std::move(*created);

  // A PEFT adapter shaped for the default model (as lora_service_test makes).
  const wt::TinySpec spec = wt::SpecOfModel(e->GetModelConfig());
  wt::AdapterSpec a;
  a.rank = 4;
  a.targets = {"q_proj", "v_proj", "o_proj"};
  std::mt19937 rng(30);
  ASSERT_TRUE(wt::WriteAdapter(root + "/x", a, wt::RandomAdapter(spec, a, &rng)).ok());
  ASSERT_TRUE(e->AddLora({"x", 0, root + "/x"}).ok());

  // Alone first (this also compiles and caches the grammar).
  const CompletionOutput free_alone = Collect(Submit(e.get(), Free(), "free-alone", "x"));
  ASSERT_EQ(free_alone.token_ids.size(), static_cast<size_t>(kFreeTokens));
  const CompletionOutput base_alone = Collect(Submit(e.get(), Free(), "base-free", ""));
  EXPECT_NE(free_alone.token_ids, base_alone.token_ids) << "the adapter should change the output";
  EXPECT_NE(SchemaViolation(free_alone.text), "")
      << "unconstrained output already fits the schema, so masking is not tested: "
      << free_alone.text;
  Collect(Submit(e.get(), Constrained(), "warm", "x"));

  // The three together: queued while the engine sleeps, so they start in
  // one step and decode side by side.
  ASSERT_TRUE(e->ResetPrefixCache().ok());
  ASSERT_TRUE(e->Sleep(1).ok());
  std::shared_ptr<RequestOutputStream> lora_json = Submit(e.get(), Constrained(), "lora-json", "x");
  std::shared_ptr<RequestOutputStream> lora_free = Submit(e.get(), Free(), "lora-free", "x");
  std::shared_ptr<RequestOutputStream> base_json = Submit(e.get(), Constrained(), "base-json", "");
  ASSERT_TRUE(lora_json && lora_free && base_json);
  ASSERT_TRUE(e->WakeUp().ok());

  const CompletionOutput lj = Collect(lora_json);
  const CompletionOutput lf = Collect(lora_free);
  const CompletionOutput bj = Collect(base_json);
  LOG(INFO) << "lora+json: " << lj.text << "\nlora free: " << lf.text << "\nbase+json: " << bj.text;
  EXPECT_EQ(SchemaViolation(lj.text), "") << "LoRA constrained: " << lj.text;
  EXPECT_EQ(lj.finish_reason, "stop") << lj.text;
  EXPECT_EQ(SchemaViolation(bj.text), "") << "base constrained: " << bj.text;
  EXPECT_EQ(bj.finish_reason, "stop") << bj.text;
  EXPECT_EQ(lf.token_ids, free_alone.token_ids) << lf.text << " vs alone " << free_alone.text;
}

}  // namespace
}  // namespace rill::engine
