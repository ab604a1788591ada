// The frontend's span of one request ("llm_request", SERVER): its parent is
// the client's W3C traceparent (StartRequest.trace_headers, else the
// Generate call's metadata); the engine's spans hang below it through the
// traceparent written into EngineStart.trace_headers, and so does the
// frontend's own "detokenize" span.
#ifndef RILL_FRONTEND_REQUEST_TRACE_H_
#define RILL_FRONTEND_REQUEST_TRACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "base/tracing/span.h"
#include "rill/internal/engine.pb.h"
#include "rill/v1/inference.pb.h"

namespace rill::frontend {

struct RequestTrace {
  base::tracing::Span span;  // Ids, parent, start and request attributes set.
  // Detokenization of the engine's outputs: busy time summed over outputs,
  // the first output's start and the last one's end (the "detokenize"
  // child span's extent), and how many token ids were turned into text.
  absl::Duration detokenize;
  absl::Time detokenize_first = absl::InfinitePast();
  absl::Time detokenize_last = absl::InfinitePast();
  int64_t detokenized_tokens = 0;

  // Adds one engine output's detokenization, from `start` to `end`.
  void RecordDetokenize(absl::Time start, absl::Time end, int64_t tokens);
};

// Starts the request's span (at `received`) and sets the engine's traceparent/tracestate in
// `engine_start`. A missing or malformed traceparent starts a new trace.
RequestTrace BeginRequestTrace(const std::string& request_id, const rill::v1::StartRequest& start,
                               const grpc::ServerContext& ctx, absl::Time received,
                               rill::internal::EngineStart* engine_start);

// The finished spans, given the request's last response: "llm_request"
// first, then its "detokenize" child when any output was detokenized.
std::vector<base::tracing::Span> EndRequestTrace(RequestTrace trace,
                                                 const rill::v1::GenerateResponse& last);

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_REQUEST_TRACE_H_
