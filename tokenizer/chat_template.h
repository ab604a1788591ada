// Chat templates without a Jinja engine: the template string is recognised
// as one of a few known families and rendered by hand, byte-for-byte as
// Jinja (HF settings) renders it. Unknown templates are rejected.
#ifndef RILL_TOKENIZER_CHAT_TEMPLATE_H_
#define RILL_TOKENIZER_CHAT_TEMPLATE_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace rill::tokenizer {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

class ChatTemplate {
 public:
  enum class Family {
    kChatMl,               // <|im_start|>role\n...<|im_end|>\n
    kChatMlDefaultSystem,  // ChatML + default system prompt (SmolLM2, Qwen2)
    kLlama3,               // <|start_header_id|>role<|end_header_id|>\n\n
    kLlama2,               // <s>[INST] <<SYS>>...<</SYS>> ... [/INST]
  };

  // UnimplementedError when the template is not a known family.
  static absl::StatusOr<ChatTemplate> Create(std::string_view template_text);

  // bos/eos_token: the token texts the template may reference. Fails (like
  // the template's raise_exception) on role orders the template rejects.
  absl::StatusOr<std::string> Apply(absl::Span<const ChatMessage> messages,
                                    bool add_generation_prompt,
                                    std::string_view bos_token,
                                    std::string_view eos_token) const;

  Family family() const { return family_; }
  const std::string& default_system_prompt() const { return system_; }

 private:
  ChatTemplate(Family f, std::string system)
      : family_(f), system_(std::move(system)) {}
  Family family_;
  std::string system_;
};

// Exposed for tests: whitespace inside {{ }} / {% %} (outside string
// literals) removed, literals decoded and wrapped in \x01...\x02.
std::string CanonicalizeTemplate(std::string_view t);

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_CHAT_TEMPLATE_H_
