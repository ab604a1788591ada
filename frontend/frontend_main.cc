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

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "base/flags_usage.h"
#include "base/metrics/http_server.h"
#include "base/tracing/span_exporter.h"
#include "base/port_file.h"
#include "base/secret_file.h"
#include "frontend/frontend_metrics.h"
#include "frontend/frontend_server.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on.");
ABSL_FLAG(int, port, 50051, "TCP port; 0 picks a free one (see --port_file).");
ABSL_FLAG(bool, reuse_port, false,
          "Bind with SO_REUSEPORT, so several frontends share --port (the kernel spreads "
          "connections over them); `rill serve --frontends=N` sets it. Off: the port must be "
          "free.");
ABSL_FLAG(std::string, port_file, "",
          "If set, the bound port is written here once the server is up.");
ABSL_FLAG(std::string, engine, "127.0.0.1:50052", "The engine's host:port.");
ABSL_FLAG(int, metrics_port, 0,
          "Serve Prometheus metrics (rill:frontend_...) at http://<--host>:<port>/metrics; "
          "0 = off.");
ABSL_FLAG(std::string, otlp_traces_endpoint, "",
          "Export a span per request (llm_request, a child of the client's W3C traceparent) "
          "over OTLP/HTTP JSON to <url>/v1/traces, e.g. http://127.0.0.1:4318; empty = off.");
ABSL_FLAG(std::string, frontend_id, "0",
          "This replica's id: prefixes server-assigned request ids, reported by GetLoad.");
ABSL_FLAG(std::string, admin_token, "",
          "Serve rill.v1.Admin, requiring `authorization: Bearer <token>`. Empty: no Admin.");
ABSL_FLAG(std::string, admin_token_file, "",
          "File holding the admin token (instead of --admin_token, which `ps` shows); no file "
          "at that path: no Admin.");
ABSL_FLAG(std::string, engine_secret_file, "",
          "File holding the engine's secret, sent on every engine call (rill serve writes one "
          "per run). Without it (or an --engine_tls_cert the engine trusts) a rill-engine refuses "
          "this frontend, which then exits with code 2.");
ABSL_FLAG(int, engine_wait_s, 120, "How long to wait for the engine at start.");
ABSL_FLAG(int, client_send_buffer, 1024,
          "Responses queued per client Generate stream before it counts as full "
          "(twice this is a hard cap).");
ABSL_FLAG(int64_t, client_send_buffer_bytes, 8 << 20,
          "Bytes of responses queued per client Generate stream before it counts as full "
          "(twice this is a hard cap).");
ABSL_FLAG(int, client_stall_timeout_ms, 30000,
          "A stream whose send buffer stays full this long, or to which no response could be "
          "written this long, is ended RESOURCE_EXHAUSTED: its requests are aborted at the "
          "engine (the client was not reading).");
ABSL_FLAG(int, max_pending_requests, 4096,
          "Running requests over all streams of this frontend; more get "
          "RESOURCE_EXHAUSTED. 0: no limit.");
ABSL_FLAG(int64_t, max_prompt_tokens, 0, "Prompt token limit; 0: the model context.");
ABSL_FLAG(int64_t, max_tokens_limit, 0, "Largest sampling.max_tokens accepted; 0: no cap.");
ABSL_FLAG(int, max_n, 64, "Largest sampling.n accepted.");
ABSL_FLAG(int, max_stop_strings, 64, "Most stop strings per request.");
ABSL_FLAG(int, max_stop_bytes, 4096, "Most bytes over all stop strings of a request.");
ABSL_FLAG(int, max_receive_message_bytes, 8 << 20,
          "Largest client message accepted; larger ones get RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_send_message_bytes, 64 << 20, "Largest message sent to a client.");
ABSL_FLAG(int, engine_max_message_bytes, 256 << 20,
          "Largest message sent to / received from the engine.");
ABSL_FLAG(int, keepalive_time_ms, 30000,
          "gRPC keepalive ping interval, to clients and to the engine.");
ABSL_FLAG(int, keepalive_timeout_ms, 10000,
          "A peer that does not answer a keepalive ping this fast is dropped.");
ABSL_FLAG(int, shutdown_grace_ms, 30000,
          "On SIGTERM/SIGINT: how long running requests may finish before the rest are "
          "ended with finish_reason ABORT (health is NOT_SERVING and new calls are refused "
          "meanwhile).");
ABSL_FLAG(int, max_logprobs, 20, "Largest logprobs / prompt_logprobs accepted.");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate: serve clients over TLS (with --tls_key).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA: require client certificates it signed (mutual TLS).");
ABSL_FLAG(std::string, engine_tls_ca, "",
          "PEM CA that signed the engine's certificate: talk TLS to the engine.");
ABSL_FLAG(std::string, engine_tls_cert, "",
          "PEM client certificate for an engine started with --tls_client_ca (mutual TLS).");
ABSL_FLAG(std::string, engine_tls_key, "", "PEM private key for --engine_tls_cert.");
ABSL_FLAG(std::string, engine_tls_server_name, "",
          "Name the engine's certificate must carry; default the host of --engine.");

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
       {"frontend/frontend_main.cc"}});
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

  rill::frontend::FrontendOptions opts;
  opts.host = absl::GetFlag(FLAGS_host);
  opts.port = absl::GetFlag(FLAGS_port);
  opts.engine_address = absl::GetFlag(FLAGS_engine);
  opts.frontend_id = absl::GetFlag(FLAGS_frontend_id);
  opts.admin_token = absl::GetFlag(FLAGS_admin_token);
  if (const std::string path = absl::GetFlag(FLAGS_admin_token_file); !path.empty()) {
    absl::StatusOr<std::string> token = rill::base::ReadOptionalSecretFile(path);
    if (!token.ok()) {
      LOG(ERROR) << "--admin_token_file: " << token.status().message();
      return 2;
    }
    opts.admin_token = *token;
  }
  if (const std::string path = absl::GetFlag(FLAGS_engine_secret_file); !path.empty()) {
    absl::StatusOr<std::string> secret = rill::base::ReadSecretFile(path);
    if (!secret.ok()) {
      LOG(ERROR) << "--engine_secret_file: " << secret.status().message();
      return 2;
    }
    opts.engine_secret = *secret;
  }
  opts.engine_wait = absl::Seconds(absl::GetFlag(FLAGS_engine_wait_s));
  opts.session.send_buffer_messages = absl::GetFlag(FLAGS_client_send_buffer);
  opts.session.send_buffer_bytes = absl::GetFlag(FLAGS_client_send_buffer_bytes);
  opts.session.stall_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_client_stall_timeout_ms));
  opts.session.max_pending_requests = absl::GetFlag(FLAGS_max_pending_requests);
  opts.session.limits.max_prompt_tokens = absl::GetFlag(FLAGS_max_prompt_tokens);
  opts.session.limits.max_tokens = absl::GetFlag(FLAGS_max_tokens_limit);
  opts.session.limits.max_n = absl::GetFlag(FLAGS_max_n);
  opts.session.limits.max_stop_strings = absl::GetFlag(FLAGS_max_stop_strings);
  opts.session.limits.max_stop_total_bytes = absl::GetFlag(FLAGS_max_stop_bytes);
  opts.session.limits.max_logprobs = absl::GetFlag(FLAGS_max_logprobs);
  opts.server_transport.max_receive_bytes = absl::GetFlag(FLAGS_max_receive_message_bytes);
  opts.server_transport.max_send_bytes = absl::GetFlag(FLAGS_max_send_message_bytes);
  opts.server_transport.reuse_port = absl::GetFlag(FLAGS_reuse_port);
  opts.engine_transport.max_receive_bytes = absl::GetFlag(FLAGS_engine_max_message_bytes);
  opts.engine_transport.max_send_bytes = absl::GetFlag(FLAGS_engine_max_message_bytes);
  opts.server_tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                     absl::GetFlag(FLAGS_tls_client_ca)};
  opts.engine_tls = {absl::GetFlag(FLAGS_engine_tls_cert), absl::GetFlag(FLAGS_engine_tls_key),
                     absl::GetFlag(FLAGS_engine_tls_ca)};
  opts.engine_tls_server_name = absl::GetFlag(FLAGS_engine_tls_server_name);
  for (auto* t : {&opts.server_transport, &opts.engine_transport}) {
    t->keepalive_time = absl::Milliseconds(absl::GetFlag(FLAGS_keepalive_time_ms));
    t->keepalive_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_keepalive_timeout_ms));
  }
  rill::frontend::FrontendMetrics metrics(opts.frontend_id);
  opts.session.metrics = &metrics;
  std::unique_ptr<rill::base::metrics::MetricsHttpServer> metrics_server;
  if (absl::Status s = rill::base::metrics::StartMetricsServerIfEnabled(
          opts.host, absl::GetFlag(FLAGS_metrics_port), [&metrics] { return metrics.Exposition(); },
          &metrics_server);
      !s.ok()) {
    LOG(ERROR) << s;
    return 2;
  }
  absl::StatusOr<std::unique_ptr<rill::base::tracing::SpanExporter>> tracer =
      rill::base::tracing::CreateExporterIfEnabled(absl::GetFlag(FLAGS_otlp_traces_endpoint),
                                                   "rill-frontend");
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
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    if (absl::Status s = rill::base::WritePortFile(port_file, server.port()); !s.ok()) {
      LOG(ERROR) << s;
      return 1;
    }
  }

  int sig = 0;
  sigwait(&set, &sig);
  LOG(INFO) << "signal " << sig << ": shutting down";
  server.Shutdown(absl::Milliseconds(absl::GetFlag(FLAGS_shutdown_grace_ms)));
  server.Wait();
  if (metrics_server != nullptr) metrics_server->Stop();
  return 0;
}
