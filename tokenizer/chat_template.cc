#include "tokenizer/chat_template.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/from_json.h"
#include "tokenizer/jinja/py_str.h"
#include "tokenizer/jinja/value.h"

namespace rill::tokenizer {
namespace {

using jinja::CallArgs;
using jinja::Value;

// transformers' raise_exception: the template's message is the error.
Value RaiseException() {
  return Value::Func("raise_exception", [](const CallArgs& a) -> Value {
    const std::string msg = a.positional.empty() ? "" : a.positional[0].ToString();
    throw jinja::RenderError(absl::StatusCode::kInvalidArgument, msg);
  });
}

// transformers' strftime_now: datetime.now().strftime(format).
Value StrftimeNow(std::time_t now) {
  return Value::Func("strftime_now", [now](const CallArgs& a) {
    if (a.positional.size() != 1 || !a.positional[0].is_string()) {
      jinja::Fail("TypeError: strftime_now() takes one format string");
    }
    std::tm local{};
    localtime_r(&now, &local);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof(buf), a.positional[0].str().c_str(), &local);
    if (n == 0 && !a.positional[0].str().empty()) jinja::Unsupported("this strftime_now() format");
    return Value::String(std::string(buf, n));
  });
}

// The globals Apply sets itself (and vLLM's own arguments): a kwarg may not
// replace one.
constexpr std::string_view kReservedNames[] = {
    "messages",  "tools",           "documents",    "add_generation_prompt", "continue_final_message",
    "bos_token", "eos_token",       "raise_exception", "strftime_now",       "chat_template", "tokenize"};

absl::Status CheckOptions(absl::Span<const ChatMessage> messages, const ChatTemplateOptions& options) {
  if (options.continue_final_message) {
    if (options.add_generation_prompt) {
      return absl::InvalidArgumentError(
          "continue_final_message and add_generation_prompt cannot both be true");
    }
    if (messages.empty() || messages.back().role != "assistant") {
      return absl::InvalidArgumentError(absl::StrCat(
          "continue_final_message: the last message must be the assistant's (it is ",
          messages.empty() ? "missing" : base::json::QuoteJsonString(messages.back().role), ")"));
    }
  }
  for (const auto& [name, value] : options.kwargs) {
    if (std::find(std::begin(kReservedNames), std::end(kReservedNames), name) != std::end(kReservedNames)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chat_template_kwargs: ", base::json::QuoteJsonString(name),
          " is not a template argument (it has its own field)"));
    }
  }
  return absl::OkStatus();
}

// The parts as vLLM's "openai" content format gives them to a template.
Value PartsValue(const std::vector<std::string>& parts) {
  std::vector<Value> list;
  list.reserve(parts.size());
  for (const std::string& text : parts) {
    list.push_back(Value::Dict({{"type", Value::String("text")}, {"text", Value::String(text)}}));
  }
  return Value::List(std::move(list));
}

Value MessageValue(const ChatMessage& m, bool content_as_parts) {
  std::vector<std::pair<std::string, Value>> fields = {
      {"role", Value::String(m.role)},
      {"content", content_as_parts && m.content_parts ? PartsValue(*m.content_parts)
                                                      : Value::String(m.content)}};
  if (m.tool_calls) fields.emplace_back("tool_calls", jinja::FromJson(*m.tool_calls));
  if (m.tool_call_id) fields.emplace_back("tool_call_id", Value::String(*m.tool_call_id));
  if (m.name) fields.emplace_back("name", Value::String(*m.name));
  return Value::Dict(std::move(fields));
}

// transformers' continue_final_message: the text up to the end of the last
// message's content, found by its last occurrence (whitespace the template
// trimmed off the content's ends is not restored).
absl::StatusOr<std::string> CutAfterFinalMessage(std::string rendered, const std::string& final_content) {
  const std::string stripped = jinja::PyStrip(final_content, std::nullopt, true, true);
  const size_t at = rendered.rfind(stripped);
  if (at == std::string::npos) {
    return absl::InvalidArgumentError(
        "continue_final_message: the chat template does not render the final message's content "
        "as given, so the text cannot end inside it");
  }
  const std::string lstripped = jinja::PyStrip(final_content, std::nullopt, true, false);
  const bool kept_trailing_space = rendered.compare(at, lstripped.size(), final_content) == 0;
  rendered.resize(at + (kept_trailing_space ? lstripped.size() : stripped.size()));
  return rendered;
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::Create(std::string_view text) {
  if (text.empty()) {
    return absl::UnimplementedError("the model has no chat template");
  }
  absl::StatusOr<jinja::Template> t = jinja::Template::Parse(text);
  if (!t.ok()) {
    // Whatever the cause, the model's template cannot be used: a load-time
    // property of the model, not of any request.
    return absl::UnimplementedError(std::string(t.status().message()));
  }
  return ChatTemplate(std::move(*t));
}

absl::StatusOr<std::string> ChatTemplate::Apply(absl::Span<const ChatMessage> messages,
                                                const ChatTemplateOptions& options) const {
  if (absl::Status s = CheckOptions(messages, options); !s.ok()) return s;
  std::vector<Value> msgs;
  msgs.reserve(messages.size());
  for (const ChatMessage& m : messages) msgs.push_back(MessageValue(m, content_as_parts_));
  std::vector<std::pair<std::string, Value>> globals = {
      {"messages", Value::List(std::move(msgs))},
      {"tools", options.tools ? jinja::FromJson(*options.tools) : Value::None()},
      {"documents", options.documents ? jinja::FromJson(*options.documents) : Value::None()},
      {"add_generation_prompt", Value::Bool(options.add_generation_prompt)},
      {"bos_token", Value::String(options.bos_token)},
      {"eos_token", Value::String(options.eos_token)},
      {"raise_exception", RaiseException()},
      {"strftime_now", StrftimeNow(options.now ? *options.now : std::time(nullptr))},
  };
  // Only the kwargs the template reads (vLLM's filter), so that a request
  // with many others costs no more than it: globals are looked up linearly.
  // A repeated name: the last value wins (Render sets them in order).
  for (const auto& [name, value] : options.kwargs) {
    if (template_.ReadsName(name)) globals.emplace_back(name, jinja::FromJson(value));
  }
  absl::StatusOr<std::string> rendered = template_.Render(std::move(globals));
  if (!rendered.ok() || !options.continue_final_message) return rendered;
  // Given as parts, the final message's text ends with its last part.
  const ChatMessage& last = messages.back();
  const bool parts = content_as_parts_ && last.content_parts && !last.content_parts->empty();
  return CutAfterFinalMessage(std::move(*rendered), parts ? last.content_parts->back() : last.content);
}

absl::StatusOr<std::string> ChatTemplate::Apply(absl::Span<const ChatMessage> messages,
                                                bool add_generation_prompt,
                                                std::string_view bos_token,
                                                std::string_view eos_token) const {
  ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.bos_token = std::string(bos_token);
  options.eos_token = std::string(eos_token);
  return Apply(messages, options);
}

}  // namespace rill::tokenizer
