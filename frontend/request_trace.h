// The frontend's span of one request ("llm_request", SERVER): its parent is
// the client's W3C traceparent (StartRequest.trace_headers, else the
// Generate call's metadata); the engine's spans hang below it through the
// traceparent written into EngineStart.trace_headers.
#ifndef RILL_FRONTEND_REQUEST_TRACE_H_
#define RILL_FRONTEND_REQUEST_TRACE_H_

#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "base/tracing/span.h"
#include "rill/internal/engine.pb.h"
#include "rill/v1/inference.pb.h"

namespace rill::frontend {

struct RequestTrace {
  base::tracing::Span span;  // Ids, parent, start and request attributes set.
  absl::Duration detokenize;  // Time spent turning engine outputs into responses.
};

// Starts the request's span (at `received`) and sets the engine's traceparent/tracestate in
// `engine_start`. A missing or malformed traceparent starts a new trace.
RequestTrace BeginRequestTrace(const std::string& request_id, const rill::v1::StartRequest& start,
                               const grpc::ServerContext& ctx, absl::Time received,
                               rill::internal::EngineStart* engine_start);

// The finished span, given the request's last response.
base::tracing::Span EndRequestTrace(RequestTrace trace, const rill::v1::GenerateResponse& last);

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_REQUEST_TRACE_H_
