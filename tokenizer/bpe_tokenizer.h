// BPE tokenizers: GPT-2 style byte-level BPE and SentencePiece-style BPE
// (Llama-2, Gemma 4), with special/added tokens matched literally in the
// input.
#ifndef RILL_TOKENIZER_BPE_TOKENIZER_H_
#define RILL_TOKENIZER_BPE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_spec.h"

namespace rill::tokenizer {

// Immutable after Create, so all methods are thread-safe.
class BpeTokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Create(
      const TokenizerSpec& spec);

  // add_special_tokens: prepend BOS / append EOS as the spec says.
  // parse_special: match control/user-defined tokens literally in text
  // (otherwise "<|im_start|>" in text is tokenized as ordinary characters).
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens,
                              bool parse_special = true) const;

  // Invalid UTF-8 becomes U+FFFD as HF's decoders make it: byte-level
  // vocabularies one per maximal invalid subpart of the whole output
  // (from_utf8_lossy); SentencePiece byte-fallback tokens "<0xXX>" per run of
  // consecutive byte tokens, which is kept when it is valid UTF-8 and
  // otherwise becomes one U+FFFD per byte (HF's ByteFallback decoder).
  // Fails on out-of-range ids.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens) const;

  // The raw bytes token `id` contributes to a decode (possibly a partial
  // UTF-8 sequence), before the leading-space strip. Id must be valid.
  void AppendTokenBytes(int32_t id, bool skip_special_tokens,
                        std::string* out) const;
  // One token of a decode (Decode's step, and the streaming
  // detokenizer's), as HF's decoders see it: a skipped token adds nothing
  // (it is gone before they run), a byte-fallback token's byte joins *run,
  // any other token ends the run (EndByteRun) and appends its bytes to *out.
  // Id must be valid.
  void AppendDecodedToken(int32_t id, bool skip_special_tokens, std::string* run,
                          std::string* out) const;
  // Appends a run of consecutive byte-fallback bytes as HF's ByteFallback
  // decoder does (the run itself when it is valid UTF-8, else one U+FFFD
  // per byte) and clears it.
  static void EndByteRun(std::string* run, std::string* out);
  // The byte of a SentencePiece byte-fallback token, or -1 for any other
  // token (every token of a byte-level vocabulary). Id must be valid.
  int FallbackByte(int32_t id) const;
  // Whether Decode drops one leading ' ' of the output (SentencePiece
  // add_space_prefix models).
  bool strips_leading_space() const { return strip_leading_space_; }

  int vocab_size() const { return static_cast<int>(tokens_.size()); }
  bool IsValidId(int32_t id) const { return id >= 0 && id < vocab_size(); }
  const std::string& IdToToken(int32_t id) const { return tokens_[id]; }
  TokenType GetTokenType(int32_t id) const { return types_[id]; }
  std::optional<int32_t> TokenToId(std::string_view token) const;
  const TokenizerSpec& spec() const { return spec_; }

 private:
  // Whether Decode drops `id` (control and unknown tokens when skipping
  // special tokens).
  bool IsSkipped(int32_t id, bool skip_special_tokens) const;

  struct MergeInfo {
    int32_t rank;
    int32_t merged_id;
  };
  struct SpecialToken {
    std::string text;
    int32_t id;
  };

  BpeTokenizer() = default;
  absl::Status Init(const TokenizerSpec& spec);

  // Splits text around special tokens (leftmost, then longest match);
  // calls on_text for plain runs and on_special for special ids.
  template <typename TextFn, typename SpecialFn>
  void SplitSpecial(std::string_view text, TextFn on_text,
                    SpecialFn on_special) const;

  // Merges initial symbol ids by merge rank (lowest first, leftmost ties).
  void MergeByRank(std::vector<int32_t>* symbols) const;
  void EncodeByteLevelWord(std::string_view word,
                           std::vector<int32_t>* out) const;
  // One text run: space marking, then (gemma4) the newline-run split.
  void EncodeSentencePiece(std::string_view text,
                           std::vector<int32_t>* out) const;
  // One '\u2581'-marked word: by score, or by merge rank when there are merges.
  void EncodeSentencePieceWord(std::string_view word,
                               std::vector<int32_t>* out) const;
  void EncodeSentencePieceByScore(const std::vector<std::string>& chars,
                                  std::vector<int32_t>* out) const;
  void AppendCharOrFallback(std::string_view ch,
                            std::vector<int32_t>* out) const;

  TokenizerSpec spec_;  // Copy kept for metadata (vocab moved out).
  bool byte_level_ = true;
  bool strip_leading_space_ = false;
  bool ignore_merges_ = false;       // Byte-level: whole-word tokens first.
  bool split_newline_runs_ = false;  // gemma4.
  PreTokenizerType pre_ = PreTokenizerType::kGpt2;
  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::vector<float> scores_;
  absl::flat_hash_map<std::string, int32_t> token_to_id_;
  absl::flat_hash_map<uint64_t, MergeInfo> merges_;  // (left << 32 | right)
  std::vector<SpecialToken> specials_;  // Sorted by text length, longest first.
  bool first_byte_has_special_[256] = {};
  int32_t byte_ids_[256];  // <0xXX> ids (SentencePiece), -1 if absent.
};

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_BPE_TOKENIZER_H_
