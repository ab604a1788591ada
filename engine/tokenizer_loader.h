// Builds the tokenizer that belongs to a checkpoint: from GGUF metadata
// (tokenizer.ggml.*) or from the HF tokenizer.json next to the weights. Lives
// in engine/ because it is where checkpoints (worker/loader) and tokenizers
// (tokenizer) meet; the frontend receives the resulting spec.
//
// A GGUF whose tokenizer model or pre-tokenizer Rill does not implement is
// refused with an error naming it and listing the supported ones, never
// tokenized with another family's rules. engine:tokenizer_vocab_parity_test
// checks every supported family against llama.cpp's golden tokenizations.
#ifndef RILL_ENGINE_TOKENIZER_LOADER_H_
#define RILL_ENGINE_TOKENIZER_LOADER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/tokenizer_spec.h"
#include "tokenizer/wordpiece_tokenizer.h"
#include "worker/loader/checkpoint.h"
#include "worker/loader/gguf.h"

namespace rill::engine {

absl::StatusOr<tokenizer::TokenizerSpec> TokenizerSpecFromCheckpoint(
    const worker::loader::Checkpoint& checkpoint);

// The BPE tokenizer spec in a GGUF's metadata (tokenizer.ggml.model gpt2,
// llama or gemma4). UnimplementedError for other models (a "bert" GGUF has a
// WordPiece tokenizer: WordPieceSpecFromGguf) and unsupported pre-tokenizers.
absl::StatusOr<tokenizer::TokenizerSpec> TokenizerSpecFromGguf(const worker::loader::GgufFile& f);

absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> LoadTokenizer(
    const worker::loader::Checkpoint& checkpoint);

// The WordPiece vocabulary of a GGUF with tokenizer.ggml.model "bert"
// (llama.cpp's WPM: word-initial pieces carry a leading U+2581 instead of
// continuations carrying "##").
absl::StatusOr<tokenizer::WordPieceSpec> WordPieceSpecFromGguf(const worker::loader::GgufFile& f);

// The WordPiece tokenizer of an encoder checkpoint (BERT): from its GGUF
// metadata or its tokenizer.json; null when it has neither.
absl::StatusOr<std::unique_ptr<tokenizer::WordPieceTokenizer>> LoadWordPieceTokenizer(
    const worker::loader::Checkpoint& checkpoint);

}  // namespace rill::engine

#endif  // RILL_ENGINE_TOKENIZER_LOADER_H_
