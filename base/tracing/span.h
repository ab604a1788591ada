// One finished span, as the exporter sends it (OTLP's Span, reduced to what
// Rill records).
#ifndef RILL_BASE_TRACING_SPAN_H_
#define RILL_BASE_TRACING_SPAN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/time/time.h"

namespace rill::base::tracing {

// OTLP SpanKind values.
enum class SpanKind { kInternal = 1, kServer = 2, kClient = 3 };

using AttributeValue = std::variant<std::string, int64_t, double, bool>;

struct Span {
  std::string trace_id;        // 32 hex digits.
  std::string span_id;         // 16 hex digits.
  std::string parent_span_id;  // "" for a root span.
  std::string trace_state;
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  absl::Time start;
  absl::Time end;
  bool error = false;  // OTLP status code ERROR (else UNSET).
  std::string status_message;
  std::vector<std::pair<std::string, AttributeValue>> attributes;

  void Set(std::string key, AttributeValue value) {
    attributes.emplace_back(std::move(key), std::move(value));
  }
};

}  // namespace rill::base::tracing

#endif  // RILL_BASE_TRACING_SPAN_H_
