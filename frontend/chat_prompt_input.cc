#include "frontend/chat_prompt_input.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "base/json.h"

namespace rill::frontend {
namespace {

using base::json::JsonValue;

// The first integer literal in `v` that int64 cannot hold, if any. Python's
// json gives the template an exact int there; Rill's template values would
// make it a float, so such a request is refused rather than rendered
// differently.
const JsonValue* IntegerPastInt64(const JsonValue& v) {
  if (v.is_number()) return v.is_integer_literal() && !v.AsInt64().has_value() ? &v : nullptr;
  if (v.is_array()) {
    for (const JsonValue& item : v.array_items()) {
      if (const JsonValue* big = IntegerPastInt64(item)) return big;
    }
  }
  if (v.is_object()) {
    for (const auto& member : v.object_members()) {
      if (const JsonValue* big = IntegerPastInt64(member.second)) return big;
    }
  }
  return nullptr;
}

// `text` parsed as a JSON value of type `want` (`want_name` in the message);
// std::nullopt when the field is empty (unset).
absl::StatusOr<std::optional<JsonValue>> ParseJsonField(const std::string& text, absl::string_view field,
                                                        JsonValue::Type want, absl::string_view want_name) {
  if (text.empty()) return std::nullopt;
  absl::StatusOr<JsonValue> parsed = base::json::ParseJson(text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": not JSON: ", parsed.status().message()));
  }
  if (parsed->type() != want) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": must be a JSON ", want_name));
  }
  if (const JsonValue* big = IntegerPastInt64(*parsed)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": the integer ", big->number_literal().substr(0, 40),
                                                   " is outside the 64-bit range chat templates get"));
  }
  return std::optional<JsonValue>(std::move(*parsed));
}

// vLLM's rule: templates print arguments with tojson, so they must be an
// object; a JSON string holding one is parsed, anything else (empty, not
// JSON, not an object) becomes {} rather than failing every later turn of a
// conversation whose history holds it.
JsonValue ArgumentsObject(const JsonValue& arguments) {
  if (arguments.is_object()) return arguments;
  if (arguments.is_string() && !arguments.string_value().empty()) {
    absl::StatusOr<JsonValue> parsed = base::json::ParseJson(arguments.string_value());
    if (parsed.ok() && parsed->is_object()) return std::move(*parsed);
  }
  return JsonValue::Object({});
}

JsonValue WithObjectArguments(const JsonValue& function) {
  std::vector<JsonValue::Member> members;
  bool has_arguments = false;
  for (const auto& [key, value] : function.object_members()) {
    if (key == "arguments") {
      members.emplace_back(key, ArgumentsObject(value));
      has_arguments = true;
    } else {
      members.emplace_back(key, value);
    }
  }
  if (!has_arguments) members.emplace_back("arguments", JsonValue::Object({}));
  return JsonValue::Object(std::move(members));
}

// An assistant's tool_calls; std::nullopt when empty (vLLM drops an empty
// list so that templates take their plain assistant path).
absl::StatusOr<std::optional<JsonValue>> ToolCalls(const std::string& text, const std::string& field) {
  absl::StatusOr<std::optional<JsonValue>> calls =
      ParseJsonField(text, field, JsonValue::Type::kArray, "array");
  if (!calls.ok() || !calls->has_value()) return calls;
  if ((*calls)->array_items().empty()) return std::nullopt;
  std::vector<JsonValue> out;
  for (size_t i = 0; i < (*calls)->array_items().size(); ++i) {
    const JsonValue& call = (*calls)->array_items()[i];
    const JsonValue* type = call.Find("type");
    const JsonValue* function = call.Find("function");
    if (!call.is_object() || (type != nullptr && type->string_value() != "function") ||
        function == nullptr || !function->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, "[", i, "]: must be an object with \"type\": \"function\" and a \"function\" object"));
    }
    std::vector<JsonValue::Member> members;
    for (const auto& [key, value] : call.object_members()) {
      members.emplace_back(key, key == "function" ? WithObjectArguments(value) : value);
    }
    out.push_back(JsonValue::Object(std::move(members)));
  }
  return std::optional<JsonValue>(JsonValue::Array(std::move(out)));
}

absl::StatusOr<tokenizer::ChatMessage> Message(const rill::v1::ChatMessage& m, int index) {
  const std::string field = absl::StrCat("chat.messages[", index, "]");
  tokenizer::ChatMessage out;
  out.role = m.role();
  if (m.content_parts_size() > 0) {
    if (!m.content().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": set content or content_parts, not both"));
    }
    std::vector<std::string> texts;
    for (int j = 0; j < m.content_parts_size(); ++j) {
      const rill::v1::ChatContentPart& part = m.content_parts(j);
      if (part.type() != "text") {
        return absl::InvalidArgumentError(absl::StrCat(field, ".content_parts[", j, "].type: ",
                                                       base::json::QuoteJsonString(part.type()),
                                                       " is not supported (only \"text\")"));
      }
      texts.push_back(part.text());
    }
    out.content = absl::StrJoin(texts, "\n");
    out.content_parts = std::move(texts);
  } else {
    out.content = m.content();
  }
  if (m.has_name()) out.name = m.name();
  if (m.has_tool_call_id()) {
    if (m.role() != "tool") {
      return absl::InvalidArgumentError(absl::StrCat(field, ".tool_call_id: only a \"tool\" message has one"));
    }
    out.tool_call_id = m.tool_call_id();
  }
  if (!m.tool_calls().empty()) {
    if (m.role() != "assistant") {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".tool_calls: only an \"assistant\" message makes tool calls"));
    }
    absl::StatusOr<std::optional<JsonValue>> calls = ToolCalls(m.tool_calls(), field + ".tool_calls");
    if (!calls.ok()) return calls.status();
    out.tool_calls = std::move(*calls);
  }
  return out;
}

}  // namespace

absl::StatusOr<tokenizer::PromptInput> ChatPromptInput(const rill::v1::ChatPrompt& chat) {
  std::vector<tokenizer::ChatMessage> messages;
  messages.reserve(chat.messages_size());
  for (int i = 0; i < chat.messages_size(); ++i) {
    absl::StatusOr<tokenizer::ChatMessage> m = Message(chat.messages(i), i);
    if (!m.ok()) return m.status();
    messages.push_back(std::move(*m));
  }
  tokenizer::PromptInput in = tokenizer::PromptInput::Chat(std::move(messages));
  tokenizer::ChatTemplateOptions& options = in.chat_options;
  options.continue_final_message = chat.continue_final_message();
  options.add_generation_prompt =
      chat.has_add_generation_prompt() ? chat.add_generation_prompt() : !chat.continue_final_message();
  absl::StatusOr<std::optional<JsonValue>> kwargs = ParseJsonField(
      chat.chat_template_kwargs(), "chat.chat_template_kwargs", JsonValue::Type::kObject, "object");
  if (!kwargs.ok()) return kwargs.status();
  if (kwargs->has_value()) options.kwargs = (*kwargs)->object_members();
  absl::StatusOr<std::optional<JsonValue>> tools =
      ParseJsonField(chat.tools(), "chat.tools", JsonValue::Type::kArray, "array");
  if (!tools.ok()) return tools.status();
  options.tools = std::move(*tools);
  absl::StatusOr<std::optional<JsonValue>> documents =
      ParseJsonField(chat.documents(), "chat.documents", JsonValue::Type::kArray, "array");
  if (!documents.ok()) return documents.status();
  options.documents = std::move(*documents);
  in.chat_template = chat.chat_template();
  return in;
}

}  // namespace rill::frontend
