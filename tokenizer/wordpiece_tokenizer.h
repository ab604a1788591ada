// WordPiece tokenizer of the BERT family, loaded from an HF tokenizer.json
// (normalizer BertNormalizer, pre_tokenizer BertPreTokenizer, model
// WordPiece, post_processor TemplateProcessing or BertProcessing) or from a
// plain WordPieceSpec (what a GGUF loader fills).
// Immutable and thread-safe after construction.
#ifndef RILL_TOKENIZER_WORDPIECE_TOKENIZER_H_
#define RILL_TOKENIZER_WORDPIECE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tokenizer/bert_normalizer.h"
#include "base/json.h"

namespace rill::tokenizer {

// A WordPiece vocabulary in plain form, free of any file format.
struct WordPieceSpec {
  std::vector<std::string> tokens;   // Id -> piece; continuations carry "##".
  std::vector<int32_t> special_ids;  // Matched literally in text ([CLS], ...).
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  std::vector<int32_t> prefix_ids;  // Around a single sequence ([CLS] ...
  std::vector<int32_t> suffix_ids;  // ... [SEP]).
  BertNormalizerOptions normalizer;
};

class WordPieceTokenizer {
 public:
  // InvalidArgument on an empty vocab or ids out of range.
  static absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> FromSpec(const WordPieceSpec& spec);
  static absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> FromTokenizerJson(
      const std::string& path);
  // From a parsed tokenizer.json; InvalidArgument unless its model is WordPiece.
  static absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> FromJson(
      const base::json::JsonValue& root);

  // Token ids of `text`; with add_special_tokens, wrapped as the
  // post-processor says ([CLS] ... [SEP]). Special tokens written in the text
  // ("[SEP]") map to their ids, as HF does. Never truncates.
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens = true) const;

  // WordPiece pieces of one pre-tokenized word ([UNK] for a word that cannot
  // be covered or is longer than max_input_chars_per_word).
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

  int vocab_size() const { return static_cast<int>(id_to_token_.size()); }
  std::optional<int32_t> TokenToId(std::string_view token) const;
  int32_t unk_id() const { return unk_id_; }
  int32_t pad_id() const { return pad_id_; }

 private:
  WordPieceTokenizer() = default;

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::string prefix_ = "##";
  int max_input_chars_per_word_ = 100;
  int32_t unk_id_ = -1;
  int32_t pad_id_ = -1;
  BertNormalizerOptions normalizer_;
  // Added special tokens matched verbatim in the raw text, longest first.
  std::vector<std::pair<std::string, int32_t>> specials_;
  std::vector<int32_t> prefix_ids_, suffix_ids_;  // Around a single sequence.
};

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_WORDPIECE_TOKENIZER_H_
