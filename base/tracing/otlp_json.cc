#include "base/tracing/otlp_json.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/json.h"

namespace rill::base::tracing {
namespace {

using ::rill::base::json::QuoteJsonString;

std::string UnixNanos(absl::Time t) { return absl::StrCat("\"", absl::ToUnixNanos(t), "\""); }

std::string EncodeValue(const AttributeValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    return absl::StrCat("{\"stringValue\":", QuoteJsonString(*s), "}");
  }
  if (const auto* i = std::get_if<int64_t>(&v)) return absl::StrCat("{\"intValue\":\"", *i, "\"}");
  if (const auto* d = std::get_if<double>(&v)) {
    // JSON has no NaN or infinity; OTLP/JSON spells them as strings.
    if (std::isnan(*d)) return "{\"doubleValue\":\"NaN\"}";
    if (std::isinf(*d)) return *d > 0 ? "{\"doubleValue\":\"Infinity\"}" : "{\"doubleValue\":\"-Infinity\"}";
    return absl::StrCat("{\"doubleValue\":", *d, "}");
  }
  return std::get<bool>(v) ? "{\"boolValue\":true}" : "{\"boolValue\":false}";
}

void AppendAttributes(const std::vector<std::pair<std::string, AttributeValue>>& attrs, std::string* out) {
  out->append("[");
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (i > 0) out->append(",");
    absl::StrAppend(out, "{\"key\":", QuoteJsonString(attrs[i].first),
                    ",\"value\":", EncodeValue(attrs[i].second), "}");
  }
  out->append("]");
}

void AppendSpan(const Span& s, std::string* out) {
  absl::StrAppend(out, "{\"traceId\":\"", s.trace_id, "\",\"spanId\":\"", s.span_id, "\"");
  if (!s.parent_span_id.empty()) absl::StrAppend(out, ",\"parentSpanId\":\"", s.parent_span_id, "\"");
  if (!s.trace_state.empty()) absl::StrAppend(out, ",\"traceState\":", QuoteJsonString(s.trace_state));
  absl::StrAppend(out, ",\"name\":", QuoteJsonString(s.name), ",\"kind\":", static_cast<int>(s.kind),
                  ",\"startTimeUnixNano\":", UnixNanos(s.start),
                  ",\"endTimeUnixNano\":", UnixNanos(s.end), ",\"attributes\":");
  AppendAttributes(s.attributes, out);
  if (s.error) {
    absl::StrAppend(out, ",\"status\":{\"code\":2,\"message\":", QuoteJsonString(s.status_message), "}");
  }
  out->append("}");
}

}  // namespace

std::string EncodeOtlpJson(const std::vector<Span>& spans, std::string_view service_name) {
  std::string out = "{\"resourceSpans\":[{\"resource\":{\"attributes\":";
  AppendAttributes({{"service.name", std::string(service_name)}}, &out);
  out.append("},\"scopeSpans\":[{\"scope\":{\"name\":\"rill\"},\"spans\":[");
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i > 0) out.append(",");
    AppendSpan(spans[i], &out);
  }
  out.append("]}]}]}");
  return out;
}

}  // namespace rill::base::tracing
