// Builds the tokenizer that belongs to a checkpoint: from GGUF metadata
// (tokenizer.ggml.*) or from the HF tokenizer.json next to the weights. Lives
// in engine/ because it is where checkpoints (worker/loader) and tokenizers
// (tokenizer) meet; the frontend receives the resulting spec.
#ifndef RILL_ENGINE_TOKENIZER_LOADER_H_
#define RILL_ENGINE_TOKENIZER_LOADER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/tokenizer_spec.h"
#include "worker/loader/checkpoint.h"

namespace rill::engine {

absl::StatusOr<tokenizer::TokenizerSpec> TokenizerSpecFromCheckpoint(
    const worker::loader::Checkpoint& checkpoint);

absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> LoadTokenizer(
    const worker::loader::Checkpoint& checkpoint);

}  // namespace rill::engine

#endif  // RILL_ENGINE_TOKENIZER_LOADER_H_
