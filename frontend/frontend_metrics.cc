#include "frontend/frontend_metrics.h"

#include "base/metrics/text_format.h"

namespace rill::frontend {
namespace {

// grpc::StatusCode names as clients and dashboards know them.
const char* CodeName(int code) {
  static const char* const kNames[] = {
      "OK",           "CANCELLED",          "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND",     "ALREADY_EXISTS",    "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",    "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",          "UNAVAILABLE",       "DATA_LOSS",
      "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? kNames[code] : "UNKNOWN";
}

}  // namespace

FrontendMetrics::FrontendMetrics(const std::string& frontend_id)
    : frontend_id_(frontend_id),
      active_streams_(registry_
                          .AddGauge("rill:frontend_active_streams", "Open Generate streams.",
                                    {"frontend_id"})
                          .Labels({frontend_id_})),
      requests_(registry_.AddCounter("rill:frontend_requests_total",
                                     "Generate requests ended, by the status code of their "
                                     "last response (OK, or why they failed or were refused).",
                                     {"frontend_id", "code"})),
      tokenization_(registry_
                        .AddHistogram("rill:frontend_tokenization_seconds",
                                      "Chat template and tokenization time of one prompt.",
                                      {"frontend_id"},
                                      base::metrics::ExponentialBuckets(1e-5, 2, 20))
                        .Labels({frontend_id_})),
      send_buffer_bytes_(registry_
                             .AddGauge("rill:frontend_send_buffer_bytes",
                                       "Response bytes queued for clients over all streams.",
                                       {"frontend_id"})
                             .Labels({frontend_id_})),
      slow_client_terminations_(
          registry_
              .AddCounter("rill:frontend_slow_client_terminations_total",
                          "Generate streams ended RESOURCE_EXHAUSTED because the client did "
                          "not read (--client_stall_timeout_ms, --client_send_buffer*).",
                          {"frontend_id"})
              .Labels({frontend_id_})) {
  // OK is present at 0 from the start, so rate() has a series to read.
  requests_.Labels({frontend_id_, "OK"});
}

void FrontendMetrics::RequestEnded(int grpc_code) {
  requests_.Labels({frontend_id_, CodeName(grpc_code)}).Increment();
}

std::string FrontendMetrics::Exposition() const {
  return base::metrics::TextFormat(registry_.Collect());
}

}  // namespace rill::frontend
