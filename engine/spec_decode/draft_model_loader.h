// Loads the draft model of --speculative_model beside the target's executor:
// a LocalModelExecutor in the engine process (on the CPU whatever the
// target's backend, also with tensor-parallel workers: a draft is small, and
// its k sequential steps per engine step would each cost a broadcast to the
// workers otherwise), with a KV cache of --kv_cache_mb in blocks of the
// target's size.
#ifndef RILL_ENGINE_SPEC_DECODE_DRAFT_MODEL_LOADER_H_
#define RILL_ENGINE_SPEC_DECODE_DRAFT_MODEL_LOADER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/engine_args.h"
#include "engine/model_executor.h"
#include "tokenizer/tokenizer_spec.h"
#include "worker/loader/checkpoint.h"

namespace rill::engine::spec_decode {

// Loads args.speculative_model and attaches it to `executor` (whose model
// is `checkpoint`). InvalidArgument naming the draft when it cannot draft
// for this model: another vocabulary size, another tokenizer, an encoder.
absl::Status AttachDraftModel(const EngineArgs& args, const worker::loader::Checkpoint& checkpoint,
                              ModelExecutor* executor);

// Whether a draft model's vocabulary is the model's: the same size, and the
// same tokens when both checkpoints carry a tokenizer (a draft without one
// is taken on its size). InvalidArgument naming `draft_path` and the first
// difference otherwise.
absl::Status CheckDraftVocabulary(const std::string& draft_path, int64_t model_vocab,
                                  int64_t draft_vocab,
                                  const absl::StatusOr<tokenizer::TokenizerSpec>& model_tokenizer,
                                  const absl::StatusOr<tokenizer::TokenizerSpec>& draft_tokenizer);

}  // namespace rill::engine::spec_decode

#endif  // RILL_ENGINE_SPEC_DECODE_DRAFT_MODEL_LOADER_H_
