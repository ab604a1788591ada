// A model's chat template (GGUF tokenizer.chat_template, HF
// tokenizer_config.json chat_template) rendered the way transformers'
// apply_chat_template renders it, by Rill's Jinja engine (tokenizer/jinja):
// the same globals (messages, bos_token, eos_token, add_generation_prompt,
// tools, documents, chat_template_kwargs, raise_exception, strftime_now),
// continue_final_message as transformers cuts the text, and the same bytes
// out. A
// template the engine cannot render is refused with an error naming what it
// lacks, never rendered differently.
#ifndef RILL_TOKENIZER_CHAT_TEMPLATE_H_
#define RILL_TOKENIZER_CHAT_TEMPLATE_H_

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/json.h"
#include "tokenizer/jinja/template.h"

namespace rill::tokenizer {

// One message as the template sees it (vLLM's ConversationMessage): a dict
// with role and content, plus name, tool_call_id and tool_calls only when
// set (templates test `'tool_calls' in message`).
struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool", ...
  std::string content;
  // The text parts the content was given as (content holds them joined with
  // "\n"). A template that iterates message content (vLLM's "openai"
  // content format, jinja::Template::LoopsOverMessageContent) gets them as
  // [{"type": "text", "text": ...}, ...]; any other gets the joined string
  // (vLLM's "string" format).
  std::optional<std::vector<std::string>> content_parts;
  std::optional<std::string> name;
  std::optional<std::string> tool_call_id;  // A "tool" result's call.
  // An assistant's calls, a JSON array as templates read it: [{"id", "type":
  // "function", "function": {"name", "arguments": {...}}}].
  std::optional<base::json::JsonValue> tool_calls;
};

// One rendering's settings besides the messages.
struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::string bos_token;  // The token texts the template may reference.
  std::string eos_token;
  // Instead of add_generation_prompt: the text ends inside the last message
  // (which must be the assistant's) so the model continues it; rendered
  // without the generation prompt and cut after that message's content.
  bool continue_final_message = false;
  // Extra template variables (transformers' chat_template_kwargs) of any
  // JSON type, e.g. {"enable_thinking", false} for Qwen3. Unset ones stay
  // undefined; the names of the globals above are refused.
  std::vector<std::pair<std::string, base::json::JsonValue>> kwargs;
  // Function definitions and retrieval documents, JSON arrays; unset: None.
  std::optional<base::json::JsonValue> tools;
  std::optional<base::json::JsonValue> documents;
  // The time strftime_now() formats (local time); unset: the current time.
  std::optional<std::time_t> now;
};

// Immutable; Apply may run on many threads at once.
class ChatTemplate {
 public:
  // UNIMPLEMENTED when the text is empty or Rill cannot use it: a syntax
  // error or a tag its engine lacks (named in the message).
  static absl::StatusOr<ChatTemplate> Create(std::string_view template_text);

  // Filters and tests the template names that Rill's engine lacks: a
  // rendering that reaches one fails with UNIMPLEMENTED naming it (worth a
  // warning when the model loads).
  std::vector<std::string> UnsupportedFeatures() const { return template_.UnsupportedFeatures(); }

  // Whether messages' content parts reach the template as a list (it
  // iterates message content: vLLM's "openai" content format).
  bool TakesContentParts() const { return content_as_parts_; }

  // INVALID_ARGUMENT when the template rejects the messages (its
  // raise_exception message, e.g. "Conversation roles must alternate ...")
  // or fails on them as jinja2 would, or the options contradict each other
  // (the message names the option); UNIMPLEMENTED when rendering reaches
  // something the engine lacks.
  absl::StatusOr<std::string> Apply(absl::Span<const ChatMessage> messages,
                                    const ChatTemplateOptions& options) const;
  absl::StatusOr<std::string> Apply(absl::Span<const ChatMessage> messages,
                                    bool add_generation_prompt,
                                    std::string_view bos_token,
                                    std::string_view eos_token) const;

 private:
  explicit ChatTemplate(jinja::Template t)
      : template_(std::move(t)), content_as_parts_(template_.LoopsOverMessageContent()) {}
  jinja::Template template_;
  bool content_as_parts_;  // Messages' content parts reach the template as a list.
};

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_CHAT_TEMPLATE_H_
