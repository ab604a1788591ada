// The OTLP/JSON encoding of an ExportTraceServiceRequest
// (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): hex ids,
// 64-bit integers as decimal strings, enums as numbers.
#ifndef RILL_BASE_TRACING_OTLP_JSON_H_
#define RILL_BASE_TRACING_OTLP_JSON_H_

#include <string>
#include <string_view>
#include <vector>

#include "base/tracing/span.h"

namespace rill::base::tracing {

// One resourceSpans (service.name = `service_name`) with one scopeSpans
// (scope "rill") holding `spans`.
std::string EncodeOtlpJson(const std::vector<Span>& spans, std::string_view service_name);

}  // namespace rill::base::tracing

#endif  // RILL_BASE_TRACING_OTLP_JSON_H_
