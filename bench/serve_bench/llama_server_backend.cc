#include "bench/serve_bench/llama_server_backend.h"

#include <cstdint>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rill::bench {

std::string LlamaCompletionBody(const BenchRequest& request) {
  std::string prompt = request.text.empty()
                           ? absl::StrCat("[", absl::StrJoin(request.token_ids, ","), "]")
                           : base::json::QuoteJsonString(request.text);
  return absl::StrCat("{\"prompt\":", prompt, ",\"n_predict\":", request.max_tokens,
                      ",\"stream\":true,\"temperature\":0,\"ignore_eos\":true,"
                      "\"cache_prompt\":true,\"return_tokens\":true}");
}

bool LlamaServerBackend::OnEvent(const base::json::JsonValue& event, double arrival_s,
                                 RequestRecord* record) {
  int tokens = 0;
  if (const base::json::JsonValue* ids = event.Find("tokens"); ids && ids->is_array()) {
    tokens = static_cast<int>(ids->array_items().size());
  } else if (const base::json::JsonValue* c = event.Find("content");
             c && !c->string_value().empty()) {
    tokens = 1;
  }
  if (tokens > 0) AddChunk(arrival_s, tokens, record);
  const base::json::JsonValue* stop = event.Find("stop");
  if (stop == nullptr || !stop->bool_value()) return false;
  // The final event's count is authoritative (a chunk may hold back bytes of
  // a partial UTF-8 character without a token list).
  if (const base::json::JsonValue* p = event.Find("tokens_predicted")) {
    if (std::optional<int64_t> n = p->AsInt64(); n.has_value() && *n >= 0) {
      record->output_tokens = *n;
    }
  }
  if (const base::json::JsonValue* p = event.Find("tokens_evaluated")) {
    record->prompt_tokens = p->AsInt64().value_or(0);
  }
  return true;
}

}  // namespace rill::bench
