// Structured-output benchmark on the default model (CPU), in one run:
//  1. step time: 32 free decoding sequences vs 16 JSON-schema-constrained +
//     16 free (rounds alternate; best round of each), and their ratio;
//  2. compile time of 10 JSON schemas, cold and cached, over the model's
//     vocabulary; mask time per token (ConstraintMatcher::Mask on a full row).
// Usage: bazel run //bench/structured_output_bench:structured_output_bench
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/grammar_vocabulary.h"
#include "engine/structured_output/constraint_matcher.h"
#include "engine/structured_output/grammar_compiler.h"

ABSL_FLAG(std::string, model, "default", "Model name or path.");
ABSL_FLAG(int, threads, 0, "Model threads (0 = all cores).");
ABSL_FLAG(int, tokens, 48, "Tokens generated per sequence in a step-time round.");
ABSL_FLAG(int, rounds, 2, "Rounds of each batch kind (best kept).");

namespace rill::engine {
namespace {

using structured_output::Constraint;
using structured_output::ConstraintKind;

// The 10 schemas of tests/clients/structured_output_check.py, compact.
const char* const kSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"address":{"type":"object","properties":{"city":{"type":"string","maxLength":10},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["city","zip"],"additionalProperties":false}},"required":["name","address"],"additionalProperties":false})",
    R"({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","maxLength":8},"minItems":1,"maxItems":3}},"required":["tags"],"additionalProperties":false})",
    R"({"type":"object","properties":{"color":{"enum":["red","green","blue"]},"size":{"type":"string","enum":["S","M","L"]}},"required":["color","size"],"additionalProperties":false})",
    R"({"type":"object","properties":{"age":{"type":"integer","minimum":0,"maximum":120},"count":{"type":"integer","minimum":-5,"maximum":5}},"required":["age","count"],"additionalProperties":false})",
    R"({"type":"object","properties":{"score":{"type":"number","minimum":0,"maximum":1},"ok":{"type":"boolean"}},"required":["score","ok"],"additionalProperties":false})",
    R"({"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{2}$"},"day":{"type":"string","format":"date"}},"required":["code","day"],"additionalProperties":false})",
    R"({"type":"object","properties":{"id":{"type":"integer","minimum":1,"maximum":999},"note":{"type":"string","maxLength":10},"flag":{"type":"boolean"}},"required":["id"],"additionalProperties":false})",
    R"({"$defs":{"point":{"type":"object","properties":{"x":{"type":"integer","minimum":0,"maximum":9},"y":{"type":"integer","minimum":0,"maximum":9}},"required":["x","y"],"additionalProperties":false}},"type":"object","properties":{"a":{"$ref":"#/$defs/point"},"b":{"$ref":"#/$defs/point"}},"required":["a","b"],"additionalProperties":false})",
    R"({"type":"object","properties":{"value":{"anyOf":[{"type":"integer","minimum":0,"maximum":99},{"type":"string","maxLength":6},{"type":"null"}]}},"required":["value"],"additionalProperties":false})",
    R"({"type":"array","minItems":1,"maxItems":2,"items":{"type":"object","properties":{"k":{"type":"string","maxLength":5},"v":{"type":"integer","minimum":0,"maximum":50}},"required":["k","v"],"additionalProperties":false}})",
};

// Never closes within the round (strings of any length), so constrained
// sequences decode as long as the free ones.
constexpr char kLongSchema[] =
    R"({"type":"array","items":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}})";

Constraint Schema(const std::string& text) { return {ConstraintKind::kJsonSchema, text, {}}; }

// Wall time per engine step for one batch: `constrained` of `total`
// sequences carry kLongSchema; all decode --tokens tokens (ignore_eos).
double StepMs(AsyncLLMEngine* e, int total, int constrained, int round) {
  std::vector<std::shared_ptr<RequestOutputStream>> streams;
  const int64_t steps_before = e->GetStats().steps;
  const absl::Time start = absl::Now();
  for (int i = 0; i < total; ++i) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = 100 * round + i;
    p.max_tokens = absl::GetFlag(FLAGS_tokens);
    p.ignore_eos = true;
    p.output_kind = OutputKind::kFinalOnly;
    if (i < constrained) p.constraint = Schema(kLongSchema);
    auto s = e->Generate(Prompt(absl::StrCat("Item ", i, " as JSON: ")), p,
                         absl::StrCat("r", round, "-", constrained, "-", i));
    CHECK(s.ok()) << s.status();
    streams.push_back(*s);
  }
  for (auto& s : streams) {
    while (true) {
      absl::StatusOr<RequestOutput> o = s->Next(absl::Minutes(30));
      if (!o.ok()) break;
      CHECK(o->error.ok()) << o->error;
    }
  }
  // Stats are published after each step; let the last one land.
  absl::SleepFor(absl::Milliseconds(50));
  const int64_t steps = e->GetStats().steps - steps_before;
  return absl::ToDoubleMilliseconds(absl::Now() - start) / std::max<int64_t>(1, steps);
}

absl::Duration CompileAll(structured_output::GrammarCompilerPool& pool) {
  const absl::Time start = absl::Now();
  for (const char* s : kSchemas) {
    absl::Notification done;
    pool.Compile(Schema(s), [&](absl::StatusOr<structured_output::CompiledConstraint> g) {
      CHECK(g.ok()) << g.status();
      done.Notify();
    });
    done.WaitForNotification();
  }
  return absl::Now() - start;
}

int Main() {
  EngineArgs args;
  args.model = absl::GetFlag(FLAGS_model);
  args.threads = absl::GetFlag(FLAGS_threads);
  args.max_num_seqs = 32;
  args.max_model_len = 512;
  auto engine = CreateAsyncLLMEngine(args);
  CHECK(engine.ok()) << engine.status();
  AsyncLLMEngine* e = engine->get();
  CHECK(e->SupportsStructuredOutputs());

  // Compile times over the model's vocabulary, on a pool of our own.
  structured_output::GrammarCompilerOptions options;
  auto pool = structured_output::GrammarCompilerPool::Create(
      GrammarVocabularyOf(*e->GetTokenizer(), e->GetModelConfig().vocab_size,
                          e->GetEngineConfig().decoding.eos_token_ids),
      options);
  CHECK(pool.ok()) << pool.status();
  const absl::Duration cold = CompileAll(**pool);
  const absl::Duration cached = CompileAll(**pool);

  // Mask time per token: a fresh matcher per schema, its first row.
  const int64_t vocab = e->GetModelConfig().vocab_size;
  std::vector<float> row(vocab);
  absl::Duration mask_total;
  int masks = 0;
  for (const char* s : kSchemas) {
    absl::Notification done;
    structured_output::CompiledConstraint g;
    (*pool)->Compile(Schema(s), [&](absl::StatusOr<structured_output::CompiledConstraint> r) {
      g = *r;
      done.Notify();
    });
    done.WaitForNotification();
    structured_output::ConstraintMatcher m(g);
    for (int i = 0; i < 50; ++i) {
      std::fill(row.begin(), row.end(), 0.0f);
      const absl::Time t = absl::Now();
      m.Mask(row.data(), vocab);
      mask_total += absl::Now() - t;
      ++masks;
    }
  }

  StepMs(e, 32, 0, -1);  // Warm-up.
  double free_ms = 1e30, mixed_ms = 1e30;
  for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    free_ms = std::min(free_ms, StepMs(e, 32, 0, r));
    mixed_ms = std::min(mixed_ms, StepMs(e, 32, 16, r));
  }
  std::printf("structured outputs, default model, %d tokens per sequence, best of %d rounds\n",
              absl::GetFlag(FLAGS_tokens), absl::GetFlag(FLAGS_rounds));
  std::printf("  step time, 32 free:                     %8.2f ms\n", free_ms);
  std::printf("  step time, 16 json_schema + 16 free:    %8.2f ms\n", mixed_ms);
  std::printf("  overhead (ratio - 1):                   %8.1f %%\n", 100.0 * (mixed_ms / free_ms - 1));
  std::printf("  compile 10 schemas, cold:               %8.1f ms (%.1f ms each)\n",
              absl::ToDoubleMilliseconds(cold), absl::ToDoubleMilliseconds(cold) / 10);
  std::printf("  compile 10 schemas, cached:             %8.3f ms\n", absl::ToDoubleMilliseconds(cached));
  std::printf("  mask per token (vocab %lld):            %8.1f us\n", static_cast<long long>(vocab),
              absl::ToDoubleMicroseconds(mask_total) / std::max(1, masks));
  return 0;
}

}  // namespace
}  // namespace rill::engine

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  return rill::engine::Main();
}
