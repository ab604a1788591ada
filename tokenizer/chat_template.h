// A model's chat template (GGUF tokenizer.chat_template, HF
// tokenizer_config.json chat_template) rendered the way transformers'
// apply_chat_template renders it, by Rill's Jinja engine (tokenizer/jinja):
// the same globals (messages, bos_token, eos_token, add_generation_prompt,
// tools=None, raise_exception, strftime_now) and the same bytes out. A
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
#include "tokenizer/jinja/template.h"

namespace rill::tokenizer {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

// One rendering's settings besides the messages.
struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::string bos_token;  // The token texts the template may reference.
  std::string eos_token;
  // Extra template variables (transformers' chat_template_kwargs), e.g.
  // {"enable_thinking", false} for Qwen3. Unset ones stay undefined.
  std::vector<std::pair<std::string, bool>> kwargs;
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

  // INVALID_ARGUMENT when the template rejects the messages (its
  // raise_exception message, e.g. "Conversation roles must alternate ...")
  // or fails on them as jinja2 would; UNIMPLEMENTED when rendering reaches
  // something the engine lacks.
  absl::StatusOr<std::string> Apply(absl::Span<const ChatMessage> messages,
                                    const ChatTemplateOptions& options) const;
  absl::StatusOr<std::string> Apply(absl::Span<const ChatMessage> messages,
                                    bool add_generation_prompt,
                                    std::string_view bos_token,
                                    std::string_view eos_token) const;

 private:
  explicit ChatTemplate(jinja::Template t) : template_(std::move(t)) {}
  jinja::Template template_;
};

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_CHAT_TEMPLATE_H_
