#include "cli/generate_command.h"

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/common_flags.h"
#include "cli/model_session.h"
#include "kernels/cpu/kernel_plan.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/incremental_detokenizer.h"
#include "kernels/backend/backend.h"
#include "worker/sampler.h"

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

namespace rill::cli {
namespace {

absl::StatusOr<std::unique_ptr<ModelSession>> OpenSession() {
  // The offline commands run the CPU model in this process: "auto" means the
  // CPU here even on a GPU machine (the GPU serves through the engine).
  const std::string requested = absl::GetFlag(FLAGS_backend);
  if (requested == "cuda") {
    return absl::UnimplementedError(
        "the offline CLI runs on the CPU backend only; serve on the GPU with "
        "`rill serve --backend=cuda` (or use --backend=cpu / auto here)");
  }
  absl::StatusOr<kernels::BackendChoice> backend =
      kernels::ChooseBackend(requested == "auto" ? "cpu" : requested);
  if (!backend.ok()) return backend.status();
  ModelSessionOptions options;
  options.model = absl::GetFlag(FLAGS_model);
  options.threads = absl::GetFlag(FLAGS_threads);
  absl::StatusOr<cpu::KernelPlan> plan = cpu::SetUpKernelPlan(MatmulFlag());
  if (!plan.ok()) return plan.status();
  options.model_options.kernel_plan = *plan;
  absl::StatusOr<cpu::KvDtype> kv_dtype =
      worker::ParseKvCacheDtype(absl::GetFlag(FLAGS_kv_cache_dtype));
  if (!kv_dtype.ok()) return kv_dtype.status();
  options.kv_cache_dtype = *kv_dtype;
  return ModelSession::Open(options);
}

int Fail(const absl::Status& status) {
  std::cerr << "error: " << status.message() << "\n";
  return 1;
}

}  // namespace

int RunGenerate(int, char**) {
  worker::SamplingConfig sampling;
  sampling.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  sampling.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  sampling.top_k = absl::GetFlag(FLAGS_top_k);
  sampling.seed = absl::GetFlag(FLAGS_seed);
  if (absl::Status s = worker::ValidateSamplingConfig(sampling); !s.ok()) return Fail(s);
  if (absl::GetFlag(FLAGS_max_tokens) < 1) {
    return Fail(absl::InvalidArgumentError("--max_tokens must be at least 1"));
  }
  absl::StatusOr<std::unique_ptr<ModelSession>> session = OpenSession();
  if (!session.ok()) return Fail(session.status());
  ModelSession& s = **session;
  const tokenizer::BpeTokenizer& tok = s.tokenizer();

  std::string text = absl::GetFlag(FLAGS_prompt);
  if (absl::GetFlag(FLAGS_chat)) {
    absl::StatusOr<tokenizer::ChatTemplate> tmpl =
        tokenizer::ChatTemplate::Create(tok.spec().chat_template);
    if (!tmpl.ok()) return Fail(tmpl.status());
    const auto& spec = tok.spec();
    auto token_text = [&](int32_t id) { return tok.IsValidId(id) ? tok.IdToToken(id) : ""; };
    absl::StatusOr<std::string> rendered =
        tmpl->Apply({tokenizer::ChatMessage{"user", text}}, /*add_generation_prompt=*/true,
                    token_text(spec.bos_id), token_text(spec.eos_id));
    if (!rendered.ok()) return Fail(rendered.status());
    text = *rendered;
  }
  std::vector<int32_t> prompt = tok.Encode(text, /*add_special_tokens=*/!absl::GetFlag(FLAGS_chat));
  if (prompt.empty()) return Fail(absl::InvalidArgumentError("the prompt is empty"));
  const int max_tokens = absl::GetFlag(FLAGS_max_tokens);
  if (static_cast<int64_t>(prompt.size()) + max_tokens > s.options().max_context) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("prompt (", prompt.size(), " tokens) + --max_tokens (", max_tokens,
                     ") exceed the context of ", s.options().max_context, " tokens")));
  }

  worker::Sampler sampler(sampling);
  tokenizer::IncrementalDetokenizer detok(&tok, /*skip_special_tokens=*/true);
  worker::ForwardBatch batch;
  batch.sequences.resize(1);
  worker::SequenceChunk& seq = batch.sequences[0];
  seq.block_table = s.BlockTable(0);
  seq.tokens = prompt;
  seq.start_pos = 0;
  std::vector<int32_t> generated;
  const int64_t vocab = s.model().config().vocab_size;
  auto t0 = std::chrono::steady_clock::now();
  auto t_first = t0;
  for (int i = 0; i < max_tokens; ++i) {
    worker::ForwardOutput out;
    if (absl::Status st = s.model().Forward(batch, &s.cache(), &out); !st.ok()) return Fail(st);
    if (i == 0) t_first = std::chrono::steady_clock::now();
    worker::SampledToken next = sampler.Sample(out.logits[0].data(), vocab);
    generated.push_back(next.token);
    const bool is_eos = next.token == tok.spec().eos_id ||
                        std::find(s.model().config().eos_token_ids.begin(),
                                  s.model().config().eos_token_ids.end(),
                                  next.token) != s.model().config().eos_token_ids.end();
    if (is_eos && !absl::GetFlag(FLAGS_ignore_eos)) break;
    absl::StatusOr<std::string> delta = detok.Push(next.token);
    if (!delta.ok()) return Fail(delta.status());
    std::cout << *delta << std::flush;
    seq.start_pos += seq.tokens.size();
    seq.tokens = {next.token};
  }
  std::cout << detok.Flush() << "\n";
  auto t1 = std::chrono::steady_clock::now();
  if (absl::GetFlag(FLAGS_print_ids)) std::cout << absl::StrJoin(generated, ",") << "\n";
  const double prefill_s = std::chrono::duration<double>(t_first - t0).count();
  const double decode_s = std::chrono::duration<double>(t1 - t_first).count();
  std::cerr << "[" << prompt.size() << " prompt tokens in " << prefill_s << " s; "
            << generated.size() << " tokens, "
            << (generated.size() > 1 ? (generated.size() - 1) / decode_s : 0.0)
            << " tokens/s decode]\n";
  return 0;
}

int RunTokenize(int, char**) {
  absl::StatusOr<std::unique_ptr<ModelSession>> session = OpenSession();
  if (!session.ok()) return Fail(session.status());
  std::vector<int32_t> ids =
      (*session)->tokenizer().Encode(absl::GetFlag(FLAGS_prompt), /*add_special_tokens=*/true);
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
  absl::StatusOr<std::unique_ptr<ModelSession>> session = OpenSession();
  if (!session.ok()) return Fail(session.status());
  absl::StatusOr<std::string> text = (*session)->tokenizer().Decode(ids, false);
  if (!text.ok()) return Fail(text.status());
  std::cout << *text << "\n";
  return 0;
}

}  // namespace rill::cli
