#include "tokenizer/tokenizer.h"

#include <utility>

#include <glog/logging.h>

#include "absl/strings/str_join.h"
#include "tokenizer/tokenizer_json.h"

namespace rill::tokenizer {

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromSpec(
    const TokenizerSpec& spec) {
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> bpe = BpeTokenizer::Create(spec);
  if (!bpe.ok()) return bpe.status();
  return FromBpe(std::move(*bpe));
}

std::unique_ptr<Tokenizer> Tokenizer::FromBpe(std::shared_ptr<const BpeTokenizer> bpe) {
  std::unique_ptr<Tokenizer> t(new Tokenizer);
  // A bad template only disables ApplyChatTemplate; encoding still works.
  t->chat_template_ = ChatTemplate::Create(bpe->spec().chat_template);
  if (!t->chat_template_.ok() && !bpe->spec().chat_template.empty()) {
    LOG(WARNING) << "the model's chat template cannot be used; chat requests will fail: "
                 << t->chat_template_.status().message();
  } else if (t->chat_template_.ok() && !t->chat_template_->UnsupportedFeatures().empty()) {
    LOG(WARNING) << "the model's chat template uses what Rill's template engine lacks ("
                 << absl::StrJoin(t->chat_template_->UnsupportedFeatures(), ", ")
                 << "); chat requests that reach it will fail with FAILED_PRECONDITION";
  }
  if (auto it = bpe->spec().named_chat_templates.find("tool_use");
      it != bpe->spec().named_chat_templates.end()) {
    t->tool_use_template_ = ChatTemplate::Create(it->second);
    if (!t->tool_use_template_->ok()) {
      LOG(WARNING) << "the model's tool_use chat template cannot be used; chat requests with tools "
                      "will fail: "
                   << t->tool_use_template_->status().message();
    }
  }
  t->bpe_ = std::move(bpe);
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromTokenizerJson(
    const std::string& path, const std::string& config_path) {
  absl::StatusOr<TokenizerSpec> spec = LoadTokenizerJson(path, config_path);
  if (!spec.ok()) return spec.status();
  return FromSpec(*spec);
}

absl::StatusOr<std::string> Tokenizer::ApplyChatTemplate(
    absl::Span<const ChatMessage> messages, bool add_generation_prompt) const {
  ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  return ApplyChatTemplate(messages, std::move(options));
}

absl::StatusOr<std::string> Tokenizer::ApplyChatTemplate(
    absl::Span<const ChatMessage> messages, ChatTemplateOptions options,
    const ChatTemplate* chat_template) const {
  if (chat_template == nullptr && options.tools.has_value() && tool_use_template_.has_value()) {
    if (!tool_use_template_->ok()) return tool_use_template_->status();
    chat_template = &**tool_use_template_;
  }
  if (chat_template == nullptr) {
    if (!chat_template_.ok()) return chat_template_.status();
    chat_template = &*chat_template_;
  }
  auto text = [&](int32_t id) {
    return bpe_->IsValidId(id) ? bpe_->IdToToken(id) : std::string();
  };
  options.bos_token = text(bos_id());
  options.eos_token = text(eos_id());
  return chat_template->Apply(messages, options);
}

}  // namespace rill::tokenizer
