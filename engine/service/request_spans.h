// The engine's spans of one request, from the times the engine records in
// RequestMetrics: "queue" (arrival -> first scheduled), "prefill" (first
// scheduled -> first token) and "decode" (first token -> finished), each a
// child of the span its W3C traceparent names, or of a new trace when it has
// none (or a malformed one). The native stream takes the traceparent from
// EngineStart.trace_headers (the frontend's llm_request); VllmEngine/Generate
// from the call's gRPC metadata (the gateway's span), one set per sample.
#ifndef RILL_ENGINE_SERVICE_REQUEST_SPANS_H_
#define RILL_ENGINE_SERVICE_REQUEST_SPANS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/tracing/span.h"
#include "base/tracing/span_exporter.h"
#include "engine/request_output.h"
#include "rill/internal/engine.pb.h"

namespace rill::engine::service {

// What the spans say about a request, whichever API it came through.
struct RequestSpanInfo {
  std::string request_id;
  int64_t prompt_tokens = 0;
  std::optional<int64_t> max_tokens;
  int64_t n = 1;
  std::string traceparent;  // W3C; empty or malformed: a new trace.
  std::string tracestate;   // Kept only with a valid traceparent.
};

class RequestSpans {
 public:
  // Null when `tracer` is null (tracing off).
  static std::shared_ptr<RequestSpans> Begin(base::tracing::SpanExporter* tracer,
                                             RequestSpanInfo info);
  // The native stream's request: its id, prompt, sampling and trace_headers.
  static std::shared_ptr<RequestSpans> Begin(base::tracing::SpanExporter* tracer,
                                             const rill::internal::EngineStart& start);

  // Every output of the request (engine callback thread); the finished one
  // exports the spans.
  void OnOutput(const engine::RequestOutput& out);

  // The spans of a finished request (exposed for tests).
  std::vector<base::tracing::Span> Spans(const engine::RequestOutput& last) const;

 private:
  RequestSpans(base::tracing::SpanExporter* tracer, RequestSpanInfo info);

  base::tracing::SpanExporter* const tracer_;
  const RequestSpanInfo info_;
  std::string trace_id_;
  std::string parent_span_id_;
  std::string trace_state_;
  int64_t generated_tokens_ = 0;  // Over all samples (outputs are deltas).
};

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_REQUEST_SPANS_H_
