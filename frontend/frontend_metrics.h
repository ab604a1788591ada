// A frontend's Prometheus metrics (`rill:frontend_...`), served at
// --metrics_port. Thread-safe: Generate sessions update them from their
// reader, writer and watchdog threads.
#ifndef RILL_FRONTEND_FRONTEND_METRICS_H_
#define RILL_FRONTEND_FRONTEND_METRICS_H_

#include <string>

#include "absl/time/time.h"
#include "base/metrics/registry.h"

namespace rill::frontend {

class FrontendMetrics {
 public:
  // `frontend_id` labels every family (several frontends may share a port).
  explicit FrontendMetrics(const std::string& frontend_id);

  // A Generate stream opened / closed.
  void StreamOpened() { active_streams_.Add(1); }
  void StreamClosed() { active_streams_.Add(-1); }
  // A Generate request ended, with the status code its last response
  // carried (OK for a finished one, the refusal's code for a refused one).
  void RequestEnded(int grpc_code);
  // Rendering the chat template and tokenizing one prompt took `d`.
  void ObserveTokenization(absl::Duration d) { tokenization_.Observe(absl::ToDoubleSeconds(d)); }
  // Bytes queued for clients over all streams went up (or down) by `delta`.
  void AddSendBufferBytes(int64_t delta) { send_buffer_bytes_.Add(static_cast<double>(delta)); }
  // A stream was ended because its client did not read it.
  void SlowClientTerminated() { slow_client_terminations_.Increment(); }

  std::string Exposition() const;

 private:
  const std::string frontend_id_;
  base::metrics::Registry registry_;
  base::metrics::Gauge& active_streams_;
  base::metrics::CounterFamily& requests_;
  base::metrics::Histogram& tokenization_;
  base::metrics::Gauge& send_buffer_bytes_;
  base::metrics::Counter& slow_client_terminations_;
};

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_FRONTEND_METRICS_H_
