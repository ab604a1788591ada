// rill-frontend: the client-facing gRPC process. Serves rill.v1.Inference
// (and rill.v1.Admin with --admin_token), health and reflection, and speaks
// token ids to one engine over a single multiplexed stream. Both sides may
// use TLS: --tls_cert/--tls_key (+ --tls_client_ca for mutual TLS) for
// clients, --engine_tls_ca (+ --engine_tls_cert/--engine_tls_key) for the
// engine.
#include <malloc.h>

#include <csignal>
#include <memory>
#include <string>

#include <glog/logging.h>

#include "absl/flags/parse.h"
#include "base/flags_usage.h"
#include "base/metrics/http_server.h"
#include "base/port_file.h"
#include "base/tracing/span_exporter.h"
#include "frontend/frontend_flags.h"
#include "frontend/frontend_launch_flags.h"
#include "frontend/frontend_metrics.h"
#include "frontend/frontend_server.h"
#include "frontend/options_from_args.h"

int main(int argc, char** argv) {
  // Buffers of 256 KiB and more (large messages, a hostile client's 1 MB
  // ids) are mapped and unmapped on their own, never carved from the heap:
  // glibc's default raises this threshold after the first such free, and
  // the heap then kept ~25 MB per burst of 1 MB messages after they ended.
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  rill::base::HandleHelpFlag(
      argc, argv,
      {"rill-frontend --engine=HOST:PORT [--flags]: serves rill.v1.Inference to clients, "
       "speaking token ids to one rill-engine.",
       {rill::frontend::FrontendFlagsFile(), rill::frontend::FrontendLaunchFlagsFile()}});
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;

  // SIGINT/SIGTERM are blocked before any gRPC thread exists (threads inherit
  // the mask) and taken synchronously by sigwait below: shutdown then runs on
  // the main thread, not inside a signal handler.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  // Every flag is declared in frontend_options.h; a bad value or file is a
  // usage error.
  const rill::frontend::FrontendArgs args = rill::frontend::FrontendArgsFromFlags();
  absl::StatusOr<rill::frontend::FrontendOptions> options =
      rill::frontend::MakeFrontendOptions(args);
  if (!options.ok()) {
    LOG(ERROR) << options.status().message();
    return 2;
  }
  rill::frontend::FrontendOptions& opts = *options;
  rill::frontend::FrontendMetrics metrics(opts.frontend_id);
  opts.session.metrics = &metrics;
  std::unique_ptr<rill::base::metrics::MetricsHttpServer> metrics_server;
  if (absl::Status s = rill::base::metrics::StartMetricsServerIfEnabled(
          opts.host, args.metrics_port, [&metrics] { return metrics.Exposition(); },
          &metrics_server);
      !s.ok()) {
    LOG(ERROR) << s;
    return 2;
  }
  absl::StatusOr<std::unique_ptr<rill::base::tracing::SpanExporter>> tracer =
      rill::base::tracing::CreateExporterIfEnabled(args.otlp_traces_endpoint, "rill-frontend");
  if (!tracer.ok()) {
    LOG(ERROR) << tracer.status();
    return 2;
  }
  opts.session.tracer = tracer->get();
  rill::frontend::FrontendServer server(opts);
  if (absl::Status s = server.Start(); !s.ok()) {
    LOG(ERROR) << s;
    // A bad flag or file (e.g. an unreadable TLS key) or a credential the
    // engine refuses is a usage error.
    return absl::IsInvalidArgument(s) || absl::IsUnauthenticated(s) ? 2 : 1;
  }
  if (!args.port_file.empty()) {
    if (absl::Status s = rill::base::WritePortFile(args.port_file, server.port()); !s.ok()) {
      LOG(ERROR) << s;
      return 1;
    }
  }

  int sig = 0;
  sigwait(&set, &sig);
  LOG(INFO) << "signal " << sig << ": shutting down";
  server.Shutdown(absl::Milliseconds(args.shutdown_grace_ms));
  server.Wait();
  if (metrics_server != nullptr) metrics_server->Stop();
  return 0;
}
