// Public tokenizer facade for the frontend: encode/decode, special ids,
// chat templates and streaming detokenization.
#ifndef RILL_TOKENIZER_TOKENIZER_H_
#define RILL_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer_spec.h"

namespace rill::tokenizer {

// Immutable and thread-safe after construction.
class Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromSpec(
      const TokenizerSpec& spec);
  // config_path (tokenizer_config.json) may be empty.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromTokenizerJson(
      const std::string& path, const std::string& config_path = "");
  // Over an already-built BPE tokenizer, with its spec's chat template.
  static std::unique_ptr<Tokenizer> FromBpe(std::shared_ptr<const BpeTokenizer> bpe);

  std::vector<int32_t> Encode(std::string_view text,
                              bool add_special_tokens = true,
                              bool parse_special = true) const {
    return bpe_->Encode(text, add_special_tokens, parse_special);
  }
  int CountTokens(std::string_view text, bool add_special_tokens = true) const {
    return static_cast<int>(Encode(text, add_special_tokens).size());
  }
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens = false) const {
    return bpe_->Decode(ids, skip_special_tokens);
  }

  int vocab_size() const { return bpe_->vocab_size(); }
  int32_t bos_id() const { return bpe_->spec().bos_id; }  // -1 if none.
  int32_t eos_id() const { return bpe_->spec().eos_id; }
  int32_t pad_id() const { return bpe_->spec().pad_id; }
  int32_t unk_id() const { return bpe_->spec().unk_id; }
  std::optional<int32_t> TokenToId(std::string_view token) const {
    return bpe_->TokenToId(token);
  }
  // True for control tokens (e.g. <|im_end|>), which end generation or are
  // hidden from users.
  bool IsControl(int32_t id) const {
    return bpe_->IsValidId(id) &&
           bpe_->GetTokenType(id) == TokenType::kControl;
  }

  // Renders the model's chat template; UnimplementedError when the model has
  // none or it is not a recognised family.
  absl::StatusOr<std::string> ApplyChatTemplate(
      absl::Span<const ChatMessage> messages, bool add_generation_prompt) const;
  // The same with every option (bos_token and eos_token are the model's, set
  // here), rendering `chat_template` instead of the model's when not null.
  // With options.tools set, the model's "tool_use" template is rendered
  // when it has one (transformers' and vLLM's choice), else its default.
  absl::StatusOr<std::string> ApplyChatTemplate(
      absl::Span<const ChatMessage> messages, ChatTemplateOptions options,
      const ChatTemplate* chat_template = nullptr) const;

  std::unique_ptr<IncrementalDetokenizer> CreateDetokenizer(
      bool skip_special_tokens = true) const {
    return std::make_unique<IncrementalDetokenizer>(bpe_.get(),
                                                    skip_special_tokens);
  }

  const BpeTokenizer& bpe() const { return *bpe_; }
  // For a user that outlives this facade (an engine given the tokenizer a
  // command already loaded).
  std::shared_ptr<const BpeTokenizer> shared_bpe() const { return bpe_; }

 private:
  Tokenizer() = default;
  std::shared_ptr<const BpeTokenizer> bpe_;
  absl::StatusOr<ChatTemplate> chat_template_ =
      absl::UnimplementedError("no chat template");
  // The spec's "tool_use" template when it has one, rendered instead of
  // chat_template_ for requests that pass tools (transformers' choice).
  std::optional<absl::StatusOr<ChatTemplate>> tool_use_template_;
};

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_TOKENIZER_H_
