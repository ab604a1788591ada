#include "base/tracing/span_exporter.h"

#include <utility>
#include <vector>

#include <glog/logging.h>
#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/tracing/otlp_json.h"

namespace rill::base::tracing {

absl::StatusOr<std::unique_ptr<SpanExporter>> SpanExporter::Create(ExporterOptions options) {
  const std::string kScheme = "http://";
  const std::string& url = options.endpoint;
  if (!absl::StartsWith(url, kScheme) || url.size() == kScheme.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--otlp_traces_endpoint '", url, "' is not an http://host:port URL (OTLP/HTTP)"));
  }
  const size_t slash = url.find('/', kScheme.size());
  std::string scheme_host_port = url.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : url.substr(slash);
  while (absl::EndsWith(path, "/")) path.pop_back();
  if (!absl::EndsWith(path, "/v1/traces")) path += "/v1/traces";
  return std::unique_ptr<SpanExporter>(
      new SpanExporter(std::move(options), std::move(scheme_host_port), std::move(path)));
}

SpanExporter::SpanExporter(ExporterOptions options, std::string scheme_host_port, std::string path)
    : options_(std::move(options)),
      scheme_host_port_(std::move(scheme_host_port)),
      path_(std::move(path)),
      thread_([this] { Loop(); }) {}

SpanExporter::~SpanExporter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void SpanExporter::Export(Span span) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= options_.max_queued_spans) {
    ++dropped_;
    return;
  }
  queue_.push_back(std::move(span));
}

int64_t SpanExporter::exported() const {
  absl::MutexLock lock(&mu_);
  return exported_;
}

int64_t SpanExporter::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

void SpanExporter::Loop() {
  while (true) {
    std::vector<Span> batch;
    bool stop;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || queue_.size() >= options_.max_batch_spans;
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), options_.flush_interval);
      stop = stopping_;
      while (!queue_.empty() && (stop || batch.size() < options_.max_batch_spans)) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    if (!batch.empty()) Send(std::move(batch));
    if (stop) return;
  }
}

void SpanExporter::Send(std::vector<Span> batch) {
  httplib::Client client(scheme_host_port_);
  const auto timeout = absl::ToChronoMicroseconds(options_.http_timeout);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  const std::string body = EncodeOtlpJson(batch, options_.service_name);
  httplib::Result result = client.Post(path_, body, "application/json");
  const bool ok = result && result->status >= 200 && result->status < 300;
  {
    absl::MutexLock lock(&mu_);
    (ok ? exported_ : dropped_) += static_cast<int64_t>(batch.size());
  }
  if (!ok) {
    LOG_EVERY_N(WARNING, 100) << "OTLP trace export to " << scheme_host_port_ << path_ << " failed ("
                              << (result ? absl::StrCat("HTTP ", result->status)
                                         : httplib::to_string(result.error()))
                              << "); " << batch.size() << " spans dropped";
  }
}

absl::StatusOr<std::unique_ptr<SpanExporter>> CreateExporterIfEnabled(const std::string& endpoint,
                                                                      const std::string& service_name) {
  if (endpoint.empty()) return std::unique_ptr<SpanExporter>();
  ExporterOptions options;
  options.endpoint = endpoint;
  options.service_name = service_name;
  absl::StatusOr<std::unique_ptr<SpanExporter>> exporter = SpanExporter::Create(std::move(options));
  if (exporter.ok()) LOG(INFO) << "exporting traces (OTLP/HTTP JSON) to " << endpoint;
  return exporter;
}

}  // namespace rill::base::tracing
