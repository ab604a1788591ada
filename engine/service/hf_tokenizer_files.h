// A Hugging Face tokenizer.json + tokenizer_config.json written from a
// tokenizer spec (what a GGUF checkpoint carries), so a gateway that builds
// its tokenizer from HF files (VllmEngine/GetTokenizer; smg uses HF
// `tokenizers`) encodes and decodes exactly as Rill does:
// - byte-level BPE ("gpt2") with each pre-tokenizer Rill implements
//   (tokenizer/pre_tokenizer.h: ByteLevel's GPT-2 regex, Digits + ByteLevel,
//   or the family's Split regex + ByteLevel);
// - SentencePiece-style BPE ("llama": Prepend/Replace '▁' normalizers, byte
//   fallback, the decoder chain of transformers' LlamaTokenizerFast; merges
//   derived from the scores when the GGUF has none: merges_from_scores.h);
// - Gemma 4 ("gemma4": as "llama", with runs of newlines split apart);
// - WordPiece (BERT: BertNormalizer, BertPreTokenizer, [CLS] ... [SEP]).
// tokenizer/tokenizer_json.h reads the BPE files back into the same spec.
// A text that occurs twice in a vocabulary maps to its first id
// (the only one encoding gives); the later id is not in the HF vocab.
// engine/service:hf_tokenizer_files_vocab_test checks all of them against
// llama.cpp's vocabularies with Python `tokenizers`.
#ifndef RILL_ENGINE_SERVICE_HF_TOKENIZER_FILES_H_
#define RILL_ENGINE_SERVICE_HF_TOKENIZER_FILES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/service/tokenizer_zip.h"
#include "tokenizer/tokenizer_spec.h"
#include "tokenizer/wordpiece_tokenizer.h"

namespace rill::engine::service {

// {tokenizer.json, tokenizer_config.json}; the config carries the chat
// template, the special tokens, add_bos/add_eos and model_max_length =
// `max_model_len`. Unimplemented (naming the model or pre-tokenizer) for a
// spec Rill's tokenizer does not implement.
absl::StatusOr<std::vector<ZipEntry>> HfTokenizerFilesFromSpec(const tokenizer::TokenizerSpec& spec,
                                                               int64_t max_model_len);

// The same for a WordPiece (BERT) vocabulary.
absl::StatusOr<std::vector<ZipEntry>> HfTokenizerFilesFromWordPieceSpec(
    const tokenizer::WordPieceSpec& spec, int64_t max_model_len);

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_HF_TOKENIZER_FILES_H_
