// Pre-tokenizers: split text into "words" before BPE, as the regexes of the
// GPT-2 / Llama-3 / Qwen2 tokenizers do. Hand-written scanners over code
// points because the regexes need the lookahead \s+(?!\S), which RE2 lacks.
#ifndef RILL_TOKENIZER_PRE_TOKENIZER_H_
#define RILL_TOKENIZER_PRE_TOKENIZER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::tokenizer {

enum class PreTokenizerType {
  // No splitting (SentencePiece models): the whole text is one word.
  kNone,
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // HF Sequence[Digits(individual_digits=true), ByteLevel(use_regex=true)]:
  // every \p{N} becomes its own piece, then the GPT-2 regex runs per piece.
  kSmolLm,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  // As kLlama3 with \p{N} instead of \p{N}{1,3}.
  kQwen2,
  // Qwen3.5: as kQwen2, with marks (\p{M}) joining letter runs and leaving
  // the punctuation class:
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|
  //  ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kQwen35,
};

// Maps a GGUF tokenizer.ggml.pre name ("gpt2", "smollm", "llama-bpe", ...).
// An unknown name is UnimplementedError naming it and listing the supported
// ones: tokenizing with another family's rules would silently give wrong ids.
absl::StatusOr<PreTokenizerType> PreTokenizerFromName(std::string_view name);

// The names PreTokenizerFromName accepts, comma-separated (for messages).
std::string SupportedPreTokenizerNames();

// Whether a word that is itself a vocabulary token is emitted whole, before
// any merge (HF BPE ignore_merges; Llama 3 sets it, and llama.cpp follows).
bool PreTokenizerIgnoresMerges(PreTokenizerType type);

// The regex of the Hugging Face Split pre-tokenizer (behavior Isolated,
// before ByteLevel with use_regex=false) that `type` scans, exactly as the
// models' tokenizer.json files spell it; empty for the types HF writes
// otherwise (kGpt2, kSmolLm: ByteLevel's own GPT-2 regex; kNone).
std::string_view PreTokenizerSplitRegex(PreTokenizerType type);

// Splits text into consecutive non-empty pieces (views into text) whose
// concatenation is text. Invalid UTF-8 bytes are treated as U+FFFD.
std::vector<std::string_view> PreTokenize(PreTokenizerType type,
                                          std::string_view text);

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_PRE_TOKENIZER_H_
