#include "tokenizer/input_processor.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rill::tokenizer {

PromptInput PromptInput::Text(std::string text, bool add_special_tokens) {
  PromptInput in;
  in.kind = Kind::kText;
  in.text = std::move(text);
  in.add_special_tokens = add_special_tokens;
  return in;
}

PromptInput PromptInput::Chat(std::vector<ChatMessage> messages, bool add_generation_prompt) {
  PromptInput in;
  in.kind = Kind::kChat;
  in.messages = std::move(messages);
  in.chat_options.add_generation_prompt = add_generation_prompt;
  return in;
}

absl::StatusOr<ProcessedPrompt> InputProcessor::Process(const PromptInput& input) const {
  const Tokenizer& tok = *tokenizer_;
  ProcessedPrompt out;
  switch (input.kind) {
    case PromptInput::Kind::kText:
      out.token_ids = tok.Encode(input.text, input.add_special_tokens);
      return out;
    case PromptInput::Kind::kTokenIds:
      for (int32_t id : input.token_ids) {
        if (id < 0 || id >= tok.vocab_size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "token_ids: id ", id, " is outside the vocabulary [0, ", tok.vocab_size(), ")"));
        }
      }
      out.token_ids = input.token_ids;
      return out;
    case PromptInput::Kind::kChat: {
      if (input.messages.empty()) {
        return absl::InvalidArgumentError("chat.messages: no messages (give at least one)");
      }
      // A request's own template is compiled for it alone: its faults are
      // the request's.
      std::optional<absl::StatusOr<ChatTemplate>> request_template;
      if (!input.chat_template.empty()) {
        request_template = ChatTemplate::Create(input.chat_template);
        if (!request_template->ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("chat.chat_template: ", request_template->status().message()));
        }
      }
      absl::StatusOr<std::string> rendered = tok.ApplyChatTemplate(
          input.messages, input.chat_options, request_template ? &**request_template : nullptr);
      if (!rendered.ok()) {
        if (absl::IsUnimplemented(rendered.status())) {
          return absl::FailedPreconditionError(
              absl::StrCat(request_template ? "chat.chat_template: the request's"
                                            : "chat: the model's",
                           " chat template is not supported: ", rendered.status().message()));
        }
        return absl::InvalidArgumentError(absl::StrCat("chat: ", rendered.status().message()));
      }
      out.text = std::move(*rendered);
      // The template already placed whatever special tokens the model wants.
      out.token_ids = tok.Encode(out.text, /*add_special_tokens=*/false);
      return out;
    }
  }
  return absl::InvalidArgumentError("prompt: empty");
}

}  // namespace rill::tokenizer
