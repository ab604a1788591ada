// Sends finished spans to an OTLP/HTTP collector (POST <endpoint>/v1/traces,
// OTLP/JSON) in batches from its own thread. Export never blocks: the queue
// is bounded and a span that does not fit is dropped and counted, so a slow
// or dead collector costs serving nothing but the spans.
#ifndef RILL_BASE_TRACING_SPAN_EXPORTER_H_
#define RILL_BASE_TRACING_SPAN_EXPORTER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/tracing/span.h"

namespace rill::base::tracing {

struct ExporterOptions {
  std::string endpoint;      // http://host:port[/prefix]; "/v1/traces" is appended unless present.
  std::string service_name;  // The resource's service.name ("rill-engine", "rill-frontend").
  size_t max_queued_spans = 4096;
  size_t max_batch_spans = 512;
  absl::Duration flush_interval = absl::Milliseconds(200);
  absl::Duration http_timeout = absl::Seconds(2);
};

class SpanExporter {
 public:
  // InvalidArgument when the endpoint is not an http:// URL.
  static absl::StatusOr<std::unique_ptr<SpanExporter>> Create(ExporterOptions options);
  ~SpanExporter();  // Sends what is queued (one try), then stops.

  // Any thread; never blocks on the network.
  void Export(Span span);

  int64_t exported() const;  // Spans the collector accepted (2xx).
  int64_t dropped() const;   // Queue full, or the POST failed.

 private:
  SpanExporter(ExporterOptions options, std::string scheme_host_port, std::string path);
  void Loop();
  void Send(std::vector<Span> batch);

  const ExporterOptions options_;
  const std::string scheme_host_port_;
  const std::string path_;
  mutable absl::Mutex mu_;
  std::deque<Span> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t exported_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// Null when `endpoint` is empty (tracing off); else an exporter or
// InvalidArgument naming the flag's bad value.
absl::StatusOr<std::unique_ptr<SpanExporter>> CreateExporterIfEnabled(const std::string& endpoint,
                                                                      const std::string& service_name);

}  // namespace rill::base::tracing

#endif  // RILL_BASE_TRACING_SPAN_EXPORTER_H_
