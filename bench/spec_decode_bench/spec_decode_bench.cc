// Batch-1 decode speed with and without speculative decoding (n-gram /
// prompt-lookup drafts, or a draft model with --speculative_model), in
// process over the real model. Two prompt sets: input-grounded
// (repeat-with-changes, code edits, copying lists: the answer copies from
// the prompt; bench/serve_bench/data/input_grounded.jsonl) and plain chat
// (the first --plain_prompts of bench/serve_bench/data/prompts.jsonl), or
// with --builtin_prompts five short prompts of each kind. Each prompt runs alone, greedy, once per
// engine, the two engines alternating per prompt so drift on a noisy
// machine hits both. Decode tokens/s = (tokens - 1) / (last token - first
// token), summed over a set's prompts. Also checks that both engines gave
// the same tokens (greedy is lossless), and counts the forward passes each
// engine ran (the saving that does not depend on the machine's load).
// --replay prints, per prompt, what n-gram drafting does along the plain
// engine's output (ngram_replay.h): where its proposals fail.
// Run from the repository root (the datasets' paths are relative to it).
// Usage: bazel run //bench/spec_decode_bench:spec_decode_bench -- --k=4
//        bazel run //bench/spec_decode_bench:spec_decode_bench --
//            --speculative_model=<draft .gguf or name> --k=4   (one command line)
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/json.h"
#include "bench/spec_decode_bench/ngram_replay.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/spec_decode/acceptance_model.h"

ABSL_FLAG(std::string, model, "default", "Model name or path.");
ABSL_FLAG(int, threads, 0, "Model threads (0 = all cores).");
ABSL_FLAG(int, k, 4,
          "Draft tokens per step of the speculating engine: --speculative_ngram_k, or "
          "--speculative_num_draft_tokens with --speculative_model.");
ABSL_FLAG(std::string, speculative_model, "",
          "Draft model (name or path) of the speculating engine instead of n-gram drafts.");
ABSL_FLAG(int, max_n, 3, "--speculative_ngram_max_n.");
ABSL_FLAG(int, min_n, 1, "--speculative_ngram_min_n.");
ABSL_FLAG(bool, ngram_pricing, true, "--speculative_ngram_pricing.");
ABSL_FLAG(int, output_len, 0,
          "Generated tokens per prompt (0: the dataset's output_len, 128 for the built-in prompts).");
ABSL_FLAG(std::string, input_grounded_dataset, "bench/serve_bench/data/input_grounded.jsonl",
          "JSONL of input-grounded prompts.");
ABSL_FLAG(std::string, plain_dataset, "bench/serve_bench/data/prompts.jsonl",
          "JSONL of plain chat prompts.");
ABSL_FLAG(int, plain_prompts, 12, "Prompts taken from --plain_dataset.");
ABSL_FLAG(bool, builtin_prompts, false, "The five built-in prompts per set instead of the datasets.");
ABSL_FLAG(bool, replay, false, "Print per prompt where n-gram proposals fail (ngram_replay.h).");
ABSL_FLAG(bool, replay_only, false,
          "--replay without the speculating engine's runs (its columns then repeat the plain one's).");
ABSL_FLAG(double, verify_token_cost, 0.4,
          "--replay's speed-up estimate: the cost of one verified draft token, in batch-1 decode "
          "steps.");
ABSL_FLAG(int, repeats, 1, "Runs of each prompt per engine.");
ABSL_FLAG(std::string, step_cost, "1,1.10,1.10,1.47,1.55,1.92,1.96,2.23,2.64",
          "--replay's x@curve: the forward's time verifying d = 0, 1, ... draft tokens, in plain "
          "decode steps (verify_cost prints it; this default: its run of 2026-12-06 09:22), and "
          "the step times the priced variant chooses draft lengths with.");

namespace rill::engine {
namespace {

struct Prompt {
  std::string text;
  int output_len = 128;
};

std::vector<Prompt> WithOutputLen(const std::vector<std::string>& texts) {
  std::vector<Prompt> out;
  for (const std::string& t : texts) out.push_back({t});
  return out;
}

// The first `limit` prompts of a serve_bench JSONL dataset ({"prompt": ...,
// "output_len": N} per line; output_len 128 when absent).
std::vector<Prompt> FromDataset(const std::string& path, int limit) {
  std::ifstream in(path);
  CHECK(in) << "cannot open " << path << " (run from the repository root)";
  std::vector<Prompt> out;
  for (std::string line; static_cast<int>(out.size()) < limit && std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    absl::StatusOr<base::json::JsonValue> doc = base::json::ParseJson(line);
    CHECK(doc.ok()) << path << ": " << doc.status();
    const base::json::JsonValue* text = doc->Find("prompt");
    CHECK(text != nullptr && text->is_string()) << path << ": a line without a text \"prompt\"";
    Prompt& p = out.emplace_back();
    p.text = text->string_value();
    if (const base::json::JsonValue* n = doc->Find("output_len"); n != nullptr && n->AsInt64()) {
      p.output_len = static_cast<int>(*n->AsInt64());
    }
  }
  return out;
}

std::vector<std::string> InputGrounded() {
  return {
      "Repeat the following paragraph, replacing every 'cat' with 'dog':\n"
      "The cat sat on the mat. The cat was happy because the mat was warm, and the cat "
      "liked warm places. Every morning the cat walked to the window, looked at the garden, "
      "and then went back to the mat to sleep.\n\nRewritten paragraph:\n",
      "Fix the bug in this function and print the whole corrected function.\n"
      "def average(values):\n    total = 0\n    for v in values:\n        total += v\n"
      "    return total / len(value)\n\ndef median(values):\n    ordered = sorted(values)\n"
      "    middle = len(ordered) // 2\n    return ordered[middle]\n\nCorrected code:\n"
      "def average(values):\n",
      "Copy this shopping list, adding quantities:\n- apples\n- bread\n- milk\n- eggs\n"
      "- cheese\n- tomatoes\n- rice\n- coffee\n\nList with quantities:\n- 6 apples\n",
      "Here is a JSON record: {\"name\": \"Ada\", \"age\": 36, \"city\": \"London\", "
      "\"languages\": [\"English\", \"French\"], \"active\": true}. Write the same record "
      "three times, changing only the name to Bob, Carol and Dan.\n",
      "Summarize by quoting the key sentences of this text: Solar panels convert sunlight "
      "into electricity. Solar panels work best in direct sunlight. The efficiency of solar "
      "panels has improved every year. Many homes now use solar panels to lower their "
      "electricity bills.\nKey sentences:\n",
  };
}

std::vector<std::string> PlainChat() {
  return {
      "Write a short poem about the sea at night.",
      "What are three good habits for staying healthy? Explain each briefly.",
      "Tell me a story about a robot who learns to paint.",
      "Why is the sky blue? Answer for a ten-year-old.",
      "Give me some ideas for a weekend trip in the mountains.",
  };
}

struct Result {
  int64_t tokens = 0;
  absl::Duration decode;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> ids;
};

Result RunOne(AsyncLLMEngine* engine, const std::string& prompt, const std::string& id,
              int output_len) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = absl::GetFlag(FLAGS_output_len) > 0 ? absl::GetFlag(FLAGS_output_len) : output_len;
  p.ignore_eos = true;
  auto stream = engine->Generate(prompt, p, id);
  CHECK(stream.ok()) << stream.status();
  RequestOutput last;
  while (true) {
    absl::StatusOr<RequestOutput> o = (*stream)->Next(absl::Seconds(600));
    if (!o.ok()) break;
    last = std::move(*o);
  }
  CHECK(last.finished && !last.outputs.empty()) << id;
  Result r;
  r.prompt_ids = last.prompt_token_ids;
  r.ids = last.outputs[0].token_ids;
  r.tokens = static_cast<int64_t>(r.ids.size()) - 1;
  r.decode = last.metrics.last_token_time - last.metrics.first_token_time;
  return r;
}

double CounterValue(const std::string& exposition, const std::string& name) {
  const size_t at = exposition.find(name + "{");
  if (at == std::string::npos) return 0;
  const size_t end = exposition.find('\n', at);
  const size_t space = exposition.rfind(' ', end);
  return std::stod(exposition.substr(space + 1, end - space - 1));
}

// Mean step time between two expositions of one engine: the whole step,
// the model's forward, sampling, and the rest (scheduling, drafting,
// rollback, outputs): the speculative path's own overhead is in the rest.
std::string StepBreakdown(const std::string& before, const std::string& after) {
  auto delta = [&](const std::string& name) { return CounterValue(after, name) - CounterValue(before, name); };
  const double steps = delta("rill:engine_step_seconds_count");
  if (steps <= 0) return "no steps";
  const double step = 1e3 * delta("rill:engine_step_seconds_sum") / steps;
  const double execute = 1e3 * delta("rill:model_execute_seconds_sum") / steps;
  const double sample = 1e3 * delta("rill:sampler_seconds_sum") / steps;
  return absl::StrFormat("step %.3f = forward %.3f + sample %.3f + rest %.3f", step, execute,
                         sample, step - execute - sample);
}

int Main() {
  EngineArgs args;
  args.model = absl::GetFlag(FLAGS_model);
  args.threads = absl::GetFlag(FLAGS_threads);
  args.max_model_len = 2048;
  args.kv_cache_mb = 128;
  args.enable_prefix_caching = false;  // Every run computes its prompt.
  auto off = CreateAsyncLLMEngine(args);
  CHECK(off.ok()) << off.status();
  const std::string draft_model = absl::GetFlag(FLAGS_speculative_model);
  if (draft_model.empty()) {
    args.speculative_ngram_k = absl::GetFlag(FLAGS_k);
    args.speculative_ngram_max_n = absl::GetFlag(FLAGS_max_n);
    args.speculative_ngram_min_n = absl::GetFlag(FLAGS_min_n);
    args.speculative_ngram_pricing = absl::GetFlag(FLAGS_ngram_pricing);
  } else {
    args.speculative_model = draft_model;
    args.speculative_num_draft_tokens = absl::GetFlag(FLAGS_k);
  }
  auto on = CreateAsyncLLMEngine(args);
  CHECK(on.ok()) << on.status();
  // Warm-up (first-touch of weights and caches).
  RunOne(off->get(), "Hello", "warm-off", 16);
  RunOne(on->get(), "Hello", "warm-on", 16);
  const bool builtin = absl::GetFlag(FLAGS_builtin_prompts);
  const std::vector<Prompt> grounded =
      builtin ? WithOutputLen(InputGrounded())
              : FromDataset(absl::GetFlag(FLAGS_input_grounded_dataset), 1000);
  const std::vector<Prompt> plain =
      builtin ? WithOutputLen(PlainChat())
              : FromDataset(absl::GetFlag(FLAGS_plain_dataset), absl::GetFlag(FLAGS_plain_prompts));
  const bool replay_only = absl::GetFlag(FLAGS_replay_only);
  const bool replay = (absl::GetFlag(FLAGS_replay) || replay_only) && draft_model.empty();
  engine::spec_decode::SpecDecodeConfig spec;
  spec.ngram_k = absl::GetFlag(FLAGS_k);
  spec.ngram_min_n = absl::GetFlag(FLAGS_min_n);
  spec.ngram_max_n = absl::GetFlag(FLAGS_max_n);

  std::printf("%-15s %8s %12s %12s %7s %12s %12s %9s\n", "prompt set", "prompts", "off tok/s",
              draft_model.empty() ? "ngram tok/s" : "draft tok/s", "ratio", "accepted", "forwards", "same ids");
  const std::string kSteps = "rill:engine_steps_total";
  int n = 0;
  for (const auto& [name, prompts] :
       {std::make_pair("input-grounded", grounded), std::make_pair("plain chat", plain)}) {
    const std::string before = (*on)->Metrics().Exposition();
    const std::string off_before = (*off)->Metrics().Exposition();
    const double off_steps_before = CounterValue(off_before, kSteps);
    Result sum_off, sum_on;
    bool same = true;
    std::vector<std::string> replay_rows;
    bench::NgramReplayStats replay_sum;
    // Variants of the policy tried offline along the same outputs.
    std::vector<std::pair<std::string, bench::ReplayVariant>> variants = {
        {"before: 1-gram k, +1", {1, 0, 0, true}},
        {"1-gram match: none", {2, 0}},
        {"k 8", {0, 1, 8}},
        {"k 16", {0, 1, 16}},
        {"k 16, 1-gram: none", {2, 0, 16}},
        {"k 16, +1", {0, 1, 16, true}}};
    std::vector<bench::NgramReplayStats> variant_sums(variants.size());
    // The engine's draft lengths priced by the measured step times: the
    // rows above use its fallback rule (draft_length.h).
    std::vector<double> step_cost;
    for (absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_step_cost), ',')) {
      double v = 0.0;
      CHECK(absl::SimpleAtod(c, &v)) << "--step_cost: not a number: " << c;
      step_cost.push_back(v);
    }
    for (auto& [label, v] : variants) v.step_cost = step_cost;
    bench::ReplayVariant engine_rule;
    engine_rule.step_cost = step_cost;
    // Priced at --k, 8 and 16, each with its own acceptance estimates.
    const std::vector<std::pair<std::string, int>> priced_ks = {
        {"priced (engine)", 0}, {"priced, k 8", 8}, {"priced, k 16", 16}};
    std::vector<engine::spec_decode::AcceptanceModel> priced_models(priced_ks.size());
    std::vector<bench::NgramReplayStats> priced_sums(priced_ks.size());
    const double token_cost = absl::GetFlag(FLAGS_verify_token_cost);
    for (int rep = 0; rep < absl::GetFlag(FLAGS_repeats); ++rep) {
      for (size_t p = 0; p < prompts.size(); ++p) {
        const Prompt& prompt = prompts[p];
        const Result a = RunOne(off->get(), prompt.text, absl::StrCat("off", ++n), prompt.output_len);
        const Result b =
            replay_only ? a : RunOne(on->get(), prompt.text, absl::StrCat("on", n), prompt.output_len);
        if (replay && rep == 0) {
          const bench::NgramReplayStats s = bench::ReplayNgram(a.prompt_ids, a.ids, spec, engine_rule);
          for (size_t v = 0; v < priced_ks.size(); ++v) {
            bench::ReplayVariant priced = engine_rule;
            priced.priced = &priced_models[v];
            priced.max_k = priced_ks[v].second;
            priced_sums[v].Add(bench::ReplayNgram(a.prompt_ids, a.ids, spec, priced));
          }
          replay_sum.Add(s);
          replay_rows.push_back(bench::FormatReplayRow(absl::StrCat(name, " #", p), s, token_cost));
          for (size_t v = 0; v < variants.size(); ++v) {
            variant_sums[v].Add(bench::ReplayNgram(a.prompt_ids, a.ids, spec, variants[v].second));
          }
        }
        sum_off.tokens += a.tokens;
        sum_off.decode += a.decode;
        sum_on.tokens += b.tokens;
        sum_on.decode += b.decode;
        same = same && a.ids == b.ids;
      }
    }
    absl::SleepFor(absl::Milliseconds(50));  // The loop publishes counters after its iteration.
    const std::string after = (*on)->Metrics().Exposition();
    const std::string kDraft = "vllm:spec_decode_num_draft_tokens_total";
    const std::string kAccepted = "vllm:spec_decode_num_accepted_tokens_total";
    const double drafted = CounterValue(after, kDraft) - CounterValue(before, kDraft);
    const double accepted = CounterValue(after, kAccepted) - CounterValue(before, kAccepted);
    // Forward passes (engine steps), prefill included: what speculation
    // saves, whatever the machine's load.
    const double on_steps = CounterValue(after, kSteps) - CounterValue(before, kSteps);
    const double off_steps =
        CounterValue((*off)->Metrics().Exposition(), kSteps) - off_steps_before;
    const double tps_off = sum_off.tokens / absl::ToDoubleSeconds(sum_off.decode);
    const double tps_on = sum_on.tokens / absl::ToDoubleSeconds(sum_on.decode);
    std::printf("%-15s %8zu %12.1f %12.1f %7.2f %5.0f/%-6.0f %5.0f/%-6.0f %9s\n", name,
                prompts.size(), tps_off, tps_on, tps_on / tps_off, accepted, drafted, on_steps,
                off_steps, same ? "yes" : "NO");
    const std::string off_after = (*off)->Metrics().Exposition();
    std::printf("  per step, ms (prefill steps included): %s\n",
                StepBreakdown(off_before, off_after).c_str());
    std::printf("  %-37s %s\n", draft_model.empty() ? "n-gram" : "draft", StepBreakdown(before, after).c_str());
    if (replay) {
      std::printf("  n-gram replay along the plain engine's outputs:\n  %s\n",
                  bench::ReplayHeader().c_str());
      for (const std::string& row : replay_rows) std::printf("  %s\n", row.c_str());
      std::printf("  %s\n", bench::FormatReplayRow("all", replay_sum, token_cost).c_str());
      for (size_t v = 0; v < priced_ks.size(); ++v) {
        std::printf("  %s\n",
                    bench::FormatReplayRow(priced_ks[v].first, priced_sums[v], token_cost).c_str());
      }
      for (size_t v = 0; v < variants.size(); ++v) {
        std::printf("  %s\n",
                    bench::FormatReplayRow(variants[v].first, variant_sums[v], token_cost).c_str());
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace rill::engine

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  return rill::engine::Main();
}
