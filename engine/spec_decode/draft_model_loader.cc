#include "engine/spec_decode/draft_model_loader.h"

#include <algorithm>
#include <memory>
#include <utility>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "engine/local_model_executor.h"
#include "engine/model_path.h"
#include "engine/spec_decode/spec_decode_config.h"
#include "engine/tokenizer_loader.h"
#include "kernels/cpu/kernel_plan.h"
#include "worker/kv_cache.h"

namespace rill::engine::spec_decode {

absl::Status CheckDraftVocabulary(const std::string& draft_path, int64_t model_vocab,
                                  int64_t draft_vocab,
                                  const absl::StatusOr<tokenizer::TokenizerSpec>& model_tokenizer,
                                  const absl::StatusOr<tokenizer::TokenizerSpec>& draft_tokenizer) {
  const std::string what = absl::StrCat("speculative_model ", draft_path, ": ");
  if (draft_vocab != model_vocab) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, "its vocabulary has ", draft_vocab, " tokens, the model's ", model_vocab,
        "; a draft model must share the model's tokenizer"));
  }
  if (!model_tokenizer.ok() || !draft_tokenizer.ok()) {
    LOG(WARNING) << what << "no tokenizer to compare with the model's; taken on its vocabulary size";
    return absl::OkStatus();
  }
  const std::vector<std::string>& a = model_tokenizer->tokens;
  const std::vector<std::string>& b = draft_tokenizer->tokens;
  const size_t n = std::min(a.size(), b.size());
  const size_t first = std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin();
  if (first < n || a.size() != b.size() || model_tokenizer->model != draft_tokenizer->model) {
    return absl::InvalidArgumentError(
        first < n ? absl::StrCat(what, "its tokenizer differs from the model's (token ", first,
                                 " is '", b[first], "' there, '", a[first], "' in the model)")
                  : absl::StrCat(what, "its tokenizer differs from the model's (",
                                 draft_tokenizer->model, " with ", b.size(), " tokens, the model's ",
                                 model_tokenizer->model, " with ", a.size(), ")"));
  }
  return absl::OkStatus();
}

absl::Status AttachDraftModel(const EngineArgs& args, const worker::loader::Checkpoint& checkpoint,
                              ModelExecutor* executor) {
  // The drafting options are checked again with the others once the engine
  // is built; these checks come before loading a model for nothing.
  SpecDecodeConfig drafting;
  drafting.ngram_k = args.speculative_ngram_k;
  drafting.draft_model = args.speculative_model;
  drafting.num_draft_tokens = args.speculative_num_draft_tokens;
  if (absl::Status s = ValidateSpecDecodeConfig(drafting); !s.ok()) return s;
  LocalExecutorOptions options;
  options.model_path = ResolveModelPath(args.speculative_model);
  // Its own --kv_cache_mb of CPU memory (pages are committed as blocks are
  // first used): as many blocks as the target's for a draft as large, more
  // for a smaller one; a CUDA target's cache may hold more sequences than
  // this, and those without draft blocks decode without drafts.
  options.kv_cache_bytes = args.kv_cache_mb << 20;
  options.block_size = executor->block_size();
  // The target's K/V format where the CPU has it (a CUDA target's bfloat16
  // is not a CPU format: f32 then).
  options.kv_cache_dtype =
      worker::ParseKvCacheDtype(args.kv_cache_dtype).value_or(kernels::cpu::KvDtype::kF32);
  options.threads = args.threads;
  options.kernel_plan = kernels::cpu::DefaultKernelPlan();
  absl::StatusOr<std::unique_ptr<LocalModelExecutor>> draft = LocalModelExecutor::Create(options);
  if (!draft.ok()) {
    return absl::Status(draft.status().code(), absl::StrCat("speculative_model ", options.model_path,
                                                            ": ", draft.status().message()));
  }
  if (!(*draft)->can_generate()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "speculative_model ", options.model_path, ": an encoder model cannot draft tokens"));
  }
  if (absl::Status s = CheckDraftVocabulary(
          options.model_path, executor->model_config().vocab_size,
          (*draft)->model_config().vocab_size, TokenizerSpecFromCheckpoint(checkpoint),
          TokenizerSpecFromCheckpoint((*draft)->checkpoint()));
      !s.ok()) {
    return s;
  }
  LOG(INFO) << "draft model " << options.model_path << " proposes up to "
            << args.speculative_num_draft_tokens << " tokens per step";
  executor->AttachDraftModel(std::move(*draft));
  return absl::OkStatus();
}

}  // namespace rill::engine::spec_decode
