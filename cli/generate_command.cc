#include "cli/generate_command.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "cli/common_flags.h"
#include "cli/model_tokenizer.h"
#include "tokenizer/input_processor.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/sampling_params.h"

ABSL_FLAG(std::string, prompt, "", "Prompt text (tokenize: the text to tokenize).");
ABSL_FLAG(int, max_tokens, 128, "Tokens to generate at most.");
ABSL_FLAG(double, temperature, 0.0, "Sampling temperature; 0 = greedy.");
ABSL_FLAG(double, top_p, 1.0, "Nucleus sampling mass in (0, 1].");
ABSL_FLAG(int, top_k, 0, "Keep the k most likely tokens; 0 = all.");
ABSL_FLAG(uint64_t, seed, 0, "Sampling seed.");
ABSL_FLAG(bool, chat, false, "Wrap the prompt as a user message in the model's chat template.");
ABSL_FLAG(bool, ignore_eos, false, "Keep generating after the end-of-sequence token.");
ABSL_FLAG(bool, print_ids, false, "Print the generated token ids after the text.");
ABSL_FLAG(std::string, ids, "", "detokenize: comma-separated token ids.");
// Structured outputs (at most one): the completion must match.
ABSL_FLAG(std::string, json_schema, "", "generate: a JSON Schema file the output must satisfy.");
ABSL_FLAG(bool, json_object, false, "generate: the output is a JSON value.");
ABSL_FLAG(std::string, regex, "", "generate: a regex the whole output must match.");
ABSL_FLAG(std::string, grammar, "", "generate: an EBNF/GBNF grammar file (rule 'root').");
ABSL_FLAG(std::vector<std::string>, choice, {}, "generate: the output is one of these (comma-separated).");

namespace rill::cli {
namespace {

int Fail(const absl::Status& status) {
  std::cerr << "error: " << status.message() << "\n";
  return 1;
}

// The engine's device for --backend. "auto" means the CPU here even on a GPU
// machine, so `rill generate` prints the same tokens everywhere.
absl::StatusOr<std::string> DeviceFromFlag() {
  const std::string requested = absl::GetFlag(FLAGS_backend);
  if (requested == "cuda") {
    return absl::UnimplementedError(
        "the offline CLI runs on the CPU backend only; serve on the GPU with "
        "`rill serve --backend=cuda` (or use --backend=cpu / auto here)");
  }
  return requested == "auto" ? std::string("cpu") : requested;
}

// The prompt's token ids: the text as is (the tokenizer's special tokens
// added, as the engine does for text prompts) or, with --chat, rendered as
// one user message by the same chat-template code the frontend uses.
absl::StatusOr<std::vector<int32_t>> PromptIds(const tokenizer::Tokenizer& tok) {
  const std::string text = absl::GetFlag(FLAGS_prompt);
  const tokenizer::PromptInput input =
      absl::GetFlag(FLAGS_chat) ? tokenizer::PromptInput::Chat({tokenizer::ChatMessage{"user", text}})
                                : tokenizer::PromptInput::Text(text);
  absl::StatusOr<tokenizer::ProcessedPrompt> prompt = tokenizer::InputProcessor(&tok).Process(input);
  if (!prompt.ok()) return prompt.status();
  return std::move(prompt->token_ids);
}

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--", flag, ": cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The --json_schema / --json_object / --regex / --grammar / --choice flag set.
absl::StatusOr<engine::structured_output::Constraint> ConstraintFromFlags() {
  using engine::structured_output::ConstraintKind;
  engine::structured_output::Constraint c;
  int set = 0;
  if (const std::string path = absl::GetFlag(FLAGS_json_schema); !path.empty()) {
    absl::StatusOr<std::string> text = ReadFile("json_schema", path);
    if (!text.ok()) return text.status();
    c = {ConstraintKind::kJsonSchema, *text, {}};
    ++set;
  }
  if (absl::GetFlag(FLAGS_json_object)) {
    c = {ConstraintKind::kJsonObject, "", {}};
    ++set;
  }
  if (const std::string regex = absl::GetFlag(FLAGS_regex); !regex.empty()) {
    c = {ConstraintKind::kRegex, regex, {}};
    ++set;
  }
  if (const std::string path = absl::GetFlag(FLAGS_grammar); !path.empty()) {
    absl::StatusOr<std::string> text = ReadFile("grammar", path);
    if (!text.ok()) return text.status();
    c = {ConstraintKind::kGrammar, *text, {}};
    ++set;
  }
  if (std::vector<std::string> choices = absl::GetFlag(FLAGS_choice); !choices.empty()) {
    c = {ConstraintKind::kChoice, "", std::move(choices)};
    ++set;
  }
  if (set > 1) {
    return absl::InvalidArgumentError(
        "at most one of --json_schema, --json_object, --regex, --grammar, --choice");
  }
  return c;
}

engine::SamplingParams SamplingFromFlags() {
  engine::SamplingParams params;
  params.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  params.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  params.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  params.top_k = absl::GetFlag(FLAGS_top_k);
  params.seed = absl::GetFlag(FLAGS_seed);
  params.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  params.output_kind = engine::OutputKind::kDelta;  // Print text as it comes.
  return params;
}

// An engine for this one request: one sequence, and a KV cache of just the
// blocks prompt + max_tokens need (the engine's default 512 MiB would only
// slow start-up). Lengths past the model's context are left for the
// engine's validation to reject, so the cache is never sized beyond it.
absl::StatusOr<std::unique_ptr<engine::AsyncLLMEngine>> CreateEngine(
    const ModelTokenizer& model, int64_t prompt_tokens, int max_tokens) {
  absl::StatusOr<std::string> device = DeviceFromFlag();
  if (!device.ok()) return device.status();
  engine::EngineArgs args;
  args.model = model.path;
  args.backend = *device;
  args.threads = absl::GetFlag(FLAGS_threads);
  args.kv_cache_dtype = absl::GetFlag(FLAGS_kv_cache_dtype);
  args.matmul = MatmulFlag();
  args.max_num_seqs = 1;
  args.enable_prefix_caching = false;  // One request: nothing to share.
  const int64_t tokens = std::clamp<int64_t>(prompt_tokens + std::max(max_tokens, 0), 1,
                                             std::max<int64_t>(model.context_length, 1));
  args.num_kv_blocks = static_cast<int>((tokens + args.block_size - 1) / args.block_size);
  // The tokenizer already loaded for the prompt serves the engine too.
  return engine::CreateAsyncLLMEngine(args, model.tokenizer->shared_bpe());
}

// What StreamToStdout's request generated, for --print_ids and the timing
// line.
struct StreamedCompletion {
  std::vector<int32_t> ids;
  std::chrono::steady_clock::time_point first_token;  // When the first id arrived.
};

// Runs one request on `engine`, writing each output's new text to stdout as
// it arrives (no trailing newline). The writes happen in the engine loop's
// callback: waking this thread for every token costs decode speed on a busy
// CPU. Bad sampling flags, an empty prompt or one too long for the context
// fail here, in the engine's validation.
absl::StatusOr<StreamedCompletion> StreamToStdout(engine::AsyncLLMEngine& engine,
                                                  const std::vector<int32_t>& prompt,
                                                  const engine::SamplingParams& params) {
  struct State {
    StreamedCompletion completion;
    absl::Status error;
    absl::Notification done;  // Orders the loop thread's writes before our reads.
  };
  // Shared with the callback, which the engine may keep past this call.
  auto state = std::make_shared<State>();
  auto print = [state](const engine::RequestOutput& out) {
    StreamedCompletion& c = state->completion;
    for (const engine::CompletionOutput& o : out.outputs) {
      if (c.ids.empty() && !o.token_ids.empty()) c.first_token = std::chrono::steady_clock::now();
      c.ids.insert(c.ids.end(), o.token_ids.begin(), o.token_ids.end());
      std::cout << o.text << std::flush;
    }
    if (!out.finished) return;
    state->error = out.error;
    state->done.Notify();
  };
  if (absl::Status s =
          engine.GenerateWithCallback(engine::Prompt(prompt), params, "generate", print);
      !s.ok()) {
    return s;
  }
  state->done.WaitForNotification();
  if (!state->error.ok()) return state->error;
  return std::move(state->completion);
}

}  // namespace

int RunGenerate(int, char**) {
  // The engine's start-up INFO lines are for server logs; here stderr keeps
  // to errors, warnings and the timing line.
  FLAGS_minloglevel = google::GLOG_WARNING;
  absl::StatusOr<ModelTokenizer> model = LoadModelTokenizer(absl::GetFlag(FLAGS_model));
  if (!model.ok()) return Fail(model.status());
  absl::StatusOr<std::vector<int32_t>> prompt = PromptIds(*model->tokenizer);
  if (!prompt.ok()) return Fail(prompt.status());
  engine::SamplingParams params = SamplingFromFlags();
  absl::StatusOr<engine::structured_output::Constraint> constraint = ConstraintFromFlags();
  if (!constraint.ok()) return Fail(constraint.status());
  params.constraint = std::move(*constraint);
  // The engine validates again on Generate; checking first spares loading
  // the weights for a mistyped flag.
  if (absl::Status s = engine::ValidateSamplingParams(params, model->tokenizer->vocab_size());
      !s.ok()) {
    return Fail(s);
  }
  absl::StatusOr<std::unique_ptr<engine::AsyncLLMEngine>> engine =
      CreateEngine(*model, prompt->size(), params.max_tokens);
  if (!engine.ok()) return Fail(engine.status());

  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<StreamedCompletion> completion = StreamToStdout(**engine, *prompt, params);
  if (!completion.ok()) return Fail(completion.status());
  const std::vector<int32_t>& generated = completion->ids;
  const auto t_first = completion->ids.empty() ? t0 : completion->first_token;
  std::cout << "\n";
  const auto t1 = std::chrono::steady_clock::now();
  if (absl::GetFlag(FLAGS_print_ids)) std::cout << absl::StrJoin(generated, ",") << "\n";
  const double prefill_s = std::chrono::duration<double>(t_first - t0).count();
  const double decode_s = std::chrono::duration<double>(t1 - t_first).count();
  std::cerr << "[" << prompt->size() << " prompt tokens in " << prefill_s << " s; "
            << generated.size() << " tokens, "
            << (generated.size() > 1 ? (generated.size() - 1) / decode_s : 0.0)
            << " tokens/s decode]\n";
  return 0;
}

int RunTokenize(int, char**) {
  absl::StatusOr<ModelTokenizer> model = LoadModelTokenizer(absl::GetFlag(FLAGS_model));
  if (!model.ok()) return Fail(model.status());
  std::vector<int32_t> ids =
      model->tokenizer->Encode(absl::GetFlag(FLAGS_prompt), /*add_special_tokens=*/true);
  std::cout << absl::StrJoin(ids, ",") << "\n";
  return 0;
}

int RunDetokenize(int, char**) {
  std::vector<int32_t> ids;
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_ids), ',', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("not a token id: '", part, "'")));
    }
    ids.push_back(id);
  }
  absl::StatusOr<ModelTokenizer> model = LoadModelTokenizer(absl::GetFlag(FLAGS_model));
  if (!model.ok()) return Fail(model.status());
  absl::StatusOr<std::string> text = model->tokenizer->Decode(ids, false);
  if (!text.ok()) return Fail(text.status());
  std::cout << *text << "\n";
  return 0;
}

}  // namespace rill::cli
