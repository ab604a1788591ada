// The engine's spans of one request, from the times the engine records in
// RequestMetrics: "queue" (arrival -> first scheduled), "prefill" (first
// scheduled -> first token) and "decode" (first token -> finished), each a
// child of the span named by EngineStart.trace_headers' traceparent (the
// frontend's llm_request), or of a new trace when it has none.
#ifndef RILL_ENGINE_SERVICE_REQUEST_SPANS_H_
#define RILL_ENGINE_SERVICE_REQUEST_SPANS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/tracing/span.h"
#include "base/tracing/span_exporter.h"
#include "engine/request_output.h"
#include "rill/internal/engine.pb.h"

namespace rill::engine::service {

class RequestSpans {
 public:
  // Null when `tracer` is null (tracing off).
  static std::shared_ptr<RequestSpans> Begin(base::tracing::SpanExporter* tracer,
                                             const rill::internal::EngineStart& start);

  // Every output of the request (engine callback thread); the finished one
  // exports the spans.
  void OnOutput(const engine::RequestOutput& out);

  // The spans of a finished request (exposed for tests).
  std::vector<base::tracing::Span> Spans(const engine::RequestOutput& last) const;

 private:
  RequestSpans(base::tracing::SpanExporter* tracer, const rill::internal::EngineStart& start);

  base::tracing::SpanExporter* const tracer_;
  std::string trace_id_;
  std::string parent_span_id_;
  std::string trace_state_;
  std::string request_id_;
  int64_t prompt_tokens_ = 0;
  rill::v1::SamplingParams sampling_;
  int64_t generated_tokens_ = 0;  // Over all samples (outputs are deltas).
};

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_REQUEST_SPANS_H_
