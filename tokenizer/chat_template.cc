#include "tokenizer/chat_template.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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
  std::vector<Value> msgs;
  msgs.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    msgs.push_back(Value::Dict({{"role", Value::String(m.role)}, {"content", Value::String(m.content)}}));
  }
  std::vector<std::pair<std::string, Value>> globals = {
      {"messages", Value::List(std::move(msgs))},
      {"tools", Value::None()},
      {"documents", Value::None()},
      {"add_generation_prompt", Value::Bool(options.add_generation_prompt)},
      {"bos_token", Value::String(options.bos_token)},
      {"eos_token", Value::String(options.eos_token)},
      {"raise_exception", RaiseException()},
      {"strftime_now", StrftimeNow(options.now ? *options.now : std::time(nullptr))},
  };
  for (const auto& [name, value] : options.kwargs) globals.emplace_back(name, Value::Bool(value));
  return template_.Render(std::move(globals));
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
