#include "bench/serve_bench/openai_backend.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rill::bench {

std::string OpenAiCompletionBody(const std::string& model, const BenchRequest& request) {
  std::string prompt = request.text.empty()
                           ? absl::StrCat("[", absl::StrJoin(request.token_ids, ","), "]")
                           : base::json::QuoteJsonString(request.text);
  return absl::StrCat("{\"model\":", base::json::QuoteJsonString(model), ",\"prompt\":", prompt,
                      ",\"max_tokens\":", request.max_tokens, ",\"min_tokens\":",
                      request.max_tokens,
                      ",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
                      "\"temperature\":0,\"ignore_eos\":true}");
}

bool OpenAiBackend::OnEvent(const base::json::JsonValue& event, double arrival_s,
                            RequestRecord* record) {
  if (const base::json::JsonValue* choices = event.Find("choices");
      choices != nullptr && choices->is_array()) {
    for (const base::json::JsonValue& c : choices->array_items()) {
      const base::json::JsonValue* text = c.Find("text");
      if (text != nullptr && !text->string_value().empty()) AddChunk(arrival_s, 1, record);
    }
  }
  if (const base::json::JsonValue* usage = event.Find("usage");
      usage != nullptr && usage->is_object()) {
    if (const base::json::JsonValue* n = usage->Find("completion_tokens")) {
      record->output_tokens = n->AsInt64().value_or(record->output_tokens);
    }
    if (const base::json::JsonValue* n = usage->Find("prompt_tokens")) {
      record->prompt_tokens = n->AsInt64().value_or(0);
    }
  }
  // The stream ends with "data: [DONE]" (HttpSseBackend stops there).
  return false;
}

}  // namespace rill::bench
