// W3C Trace Context (https://www.w3.org/TR/trace-context/): parsing and
// writing the `traceparent` header, and fresh random ids. Ids are kept as
// lowercase hex, the form both the header and OTLP/JSON use.
#ifndef RILL_BASE_TRACING_TRACE_CONTEXT_H_
#define RILL_BASE_TRACING_TRACE_CONTEXT_H_

#include <optional>
#include <string>
#include <string_view>

namespace rill::base::tracing {

struct TraceContext {
  std::string trace_id;  // 32 lowercase hex digits, not all zero.
  std::string span_id;   // 16 lowercase hex digits, not all zero: the parent of new spans.
  bool sampled = true;   // trace-flags bit 0.
  std::string tracestate;  // Passed on unchanged.
};

// The parent named by a `traceparent` value, or nullopt when it is malformed
// (wrong lengths or separators, non-hex or uppercase digits, version ff,
// all-zero ids, extra fields for version 00): per the spec, such a header is
// ignored and the callee starts a new trace.
std::optional<TraceContext> ParseTraceparent(std::string_view header);

// "00-<trace_id>-<span_id>-<flags>".
std::string FormatTraceparent(std::string_view trace_id, std::string_view span_id, bool sampled);

std::string NewTraceId();  // Random, 32 hex digits, never all zero.
std::string NewSpanId();   // Random, 16 hex digits, never all zero.

}  // namespace rill::base::tracing

#endif  // RILL_BASE_TRACING_TRACE_CONTEXT_H_
