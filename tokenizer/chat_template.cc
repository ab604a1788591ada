#include "tokenizer/chat_template.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/unicode_data.h"

namespace rill::tokenizer {
namespace {

// Templates as published (HF tokenizer_config.json / GGUF); "@SYS@" marks
// the default system prompt literal.
constexpr std::string_view kChatMlDefaultSystem =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != "
    "'system' %}{{ '<|im_start|>system\\n@SYS@<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";
constexpr std::string_view kChatMl =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' "
    "+ message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}";
constexpr std::string_view kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
constexpr std::string_view kLlama2 =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = "
    "messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = "
    "false %}{% endif %}{% for message in loop_messages %}{% if "
    "(message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 "
    "and system_message != false %}{% set content = '<<SYS>>\\n' + "
    "system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}"
    "{% set content = message['content'] %}{% endif %}{% if message['role'] "
    "== 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + "
    "' ' + eos_token }}{% endif %}{% endfor %}";

// Python str.isspace(), which Jinja's trim and str.strip() use.
bool IsPySpace(uint32_t cp) {
  return IsSpace(cp) || (cp >= 0x1C && cp <= 0x1F);
}

std::string PyStrip(std::string_view s) {
  std::vector<size_t> off;
  const std::vector<uint32_t> cps = DecodeUtf8(s, &off);
  size_t b = 0, e = cps.size();
  while (b < e && IsPySpace(cps[b])) ++b;
  while (e > b && IsPySpace(cps[e - 1])) --e;
  return std::string(s.substr(off[b], off[e] - off[b]));
}

}  // namespace

std::string CanonicalizeTemplate(std::string_view t) {
  std::string out;
  size_t i = 0;
  while (i < t.size()) {
    if (t.compare(i, 2, "{{") != 0 && t.compare(i, 2, "{%") != 0) {
      out.push_back(t[i++]);
      continue;
    }
    const std::string_view close = t[i + 1] == '{' ? "}}" : "%}";
    out.append(t.substr(i, 2));
    i += 2;
    while (i < t.size() && t.compare(i, 2, close) != 0) {
      const char c = t[i];
      if (c == '\'' || c == '"') {
        out.push_back('\x01');
        ++i;
        while (i < t.size() && t[i] != c) {
          if (t[i] == '\\' && i + 1 < t.size()) {
            const char e = t[i + 1];
            out.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e);
            i += 2;
          } else {
            out.push_back(t[i++]);
          }
        }
        out.push_back('\x02');
        ++i;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++i;
      } else {
        out.push_back(t[i++]);
      }
    }
    out.append(close);
    i += 2;
  }
  return out;
}

absl::StatusOr<ChatTemplate> ChatTemplate::Create(std::string_view text) {
  if (text.empty()) {
    return absl::UnimplementedError("the model has no chat template");
  }
  const std::string canon = CanonicalizeTemplate(text);
  if (canon == CanonicalizeTemplate(kChatMl)) {
    return ChatTemplate(Family::kChatMl, "");
  }
  if (canon == CanonicalizeTemplate(kLlama3)) {
    return ChatTemplate(Family::kLlama3, "");
  }
  if (canon == CanonicalizeTemplate(kLlama2)) {
    return ChatTemplate(Family::kLlama2, "");
  }
  const std::string known = CanonicalizeTemplate(kChatMlDefaultSystem);
  const size_t at = known.find("@SYS@");
  const std::string_view prefix = std::string_view(known).substr(0, at);
  const std::string_view suffix = std::string_view(known).substr(at + 5);
  if (canon.size() >= prefix.size() + suffix.size() &&
      canon.compare(0, prefix.size(), prefix) == 0 &&
      canon.compare(canon.size() - suffix.size(), suffix.size(), suffix) == 0) {
    std::string system = canon.substr(
        prefix.size(), canon.size() - prefix.size() - suffix.size());
    if (system.find_first_of("\x01\x02") == std::string::npos) {
      return ChatTemplate(Family::kChatMlDefaultSystem, std::move(system));
    }
  }
  return absl::UnimplementedError(
      "unrecognised chat template (supported: ChatML, ChatML with default "
      "system prompt, Llama-3, Llama-2); refusing to guess the prompt format");
}

absl::StatusOr<std::string> ChatTemplate::Apply(
    absl::Span<const ChatMessage> messages, bool add_generation_prompt,
    std::string_view bos_token, std::string_view eos_token) const {
  std::string out;
  switch (family_) {
    case Family::kChatMl:
    case Family::kChatMlDefaultSystem:
      for (size_t i = 0; i < messages.size(); ++i) {
        if (family_ == Family::kChatMlDefaultSystem && i == 0 &&
            messages[0].role != "system") {
          absl::StrAppend(&out, "<|im_start|>system\n", system_,
                          "<|im_end|>\n");
        }
        absl::StrAppend(&out, "<|im_start|>", messages[i].role, "\n",
                        messages[i].content, "<|im_end|>\n");
      }
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      return out;
    case Family::kLlama3:
      for (size_t i = 0; i < messages.size(); ++i) {
        if (i == 0) out.append(bos_token);
        absl::StrAppend(&out, "<|start_header_id|>", messages[i].role,
                        "<|end_header_id|>\n\n", PyStrip(messages[i].content),
                        "<|eot_id|>");
      }
      if (add_generation_prompt) {
        out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      }
      return out;
    case Family::kLlama2: {
      if (messages.empty()) {
        return absl::InvalidArgumentError(
            "Llama-2 chat template needs at least one message");
      }
      const bool has_system = messages[0].role == "system";
      absl::Span<const ChatMessage> loop =
          has_system ? messages.subspan(1) : messages;
      for (size_t i = 0; i < loop.size(); ++i) {
        if ((loop[i].role == "user") != (i % 2 == 0)) {
          return absl::InvalidArgumentError(
              "Conversation roles must alternate "
              "user/assistant/user/assistant/...");
        }
        std::string content =
            i == 0 && has_system
                ? absl::StrCat("<<SYS>>\n", messages[0].content,
                               "\n<</SYS>>\n\n", loop[i].content)
                : loop[i].content;
        if (loop[i].role == "user") {
          absl::StrAppend(&out, std::string(bos_token), "[INST] ", PyStrip(content),
                          " [/INST]");
        } else if (loop[i].role == "assistant") {
          absl::StrAppend(&out, " ", PyStrip(content), " ", std::string(eos_token));
        }
      }
      return out;
    }
  }
  return absl::InternalError("bad chat template family");
}

}  // namespace rill::tokenizer
