// Per-frontend knobs shared by every Generate session: the client send buffer
// and its stall timeout (slow clients), and admission limits.
#ifndef RILL_FRONTEND_SESSION_OPTIONS_H_
#define RILL_FRONTEND_SESSION_OPTIONS_H_

#include <cstdint>

#include "absl/time/time.h"

namespace rill::base::tracing {
class SpanExporter;  // base/tracing/span_exporter.h
}

namespace rill::frontend {

class FrontendMetrics;  // frontend_metrics.h

// Per-request limits checked before a request reaches the engine. 0 means
// "no limit beyond the model context" where noted.
struct RequestLimits {
  int64_t max_prompt_tokens = 0;  // 0: the model context (max_model_len - 1).
  int64_t max_tokens = 0;         // Cap on sampling.max_tokens; 0: none.
  int max_n = 64;
  int max_stop_strings = 64;
  int max_stop_total_bytes = 4096;  // Sum of all stop strings' bytes.
  int max_logprobs = 20;            // logprobs and prompt_logprobs.
  // Whether chat.chat_template (a template sent with the request) is
  // rendered; off, such requests are refused. A template is a program.
  bool trust_request_chat_template = false;
};

// gRPC transport settings, for the client-facing server and for the channel
// to the engine. Keepalive pings find dead peers (a crashed frontend or a
// half-open TCP connection) that would otherwise hold requests forever.
struct GrpcTransportOptions {
  int max_receive_bytes = 8 << 20;  // Larger messages get RESOURCE_EXHAUSTED.
  int max_send_bytes = 64 << 20;
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  // Server side: SO_REUSEPORT, so the frontends of one `rill serve` share
  // its client port. Off by default: a server then cannot join, or be
  // joined on, a port another server uses.
  bool reuse_port = false;
};

struct SessionOptions {
  // Responses, and their bytes, queued for one client stream before it counts
  // as "full"; at twice either the stream is ended at once (a bound on memory
  // whatever the responses' size).
  int send_buffer_messages = 1024;
  int64_t send_buffer_bytes = 8 << 20;
  // A stream whose buffer stays full this long, or to which no response could
  // be written this long (the transport's flow-control window is full: the
  // client is not reading), is ended RESOURCE_EXHAUSTED.
  absl::Duration stall_timeout = absl::Seconds(30);
  // Running requests over all streams of this frontend; 0: no limit.
  int max_pending_requests = 4096;
  RequestLimits limits;
  // Where sessions count streams, requests and buffers; null: not counted.
  // Outlives every session.
  FrontendMetrics* metrics = nullptr;
  // Where each request's span goes (--otlp_traces_endpoint); null: tracing
  // off, no spans and no trace headers are made. Outlives every session.
  base::tracing::SpanExporter* tracer = nullptr;
};

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_SESSION_OPTIONS_H_
