// rill-engine: hosts an AsyncEngine behind rill.internal.Engine (token
// ids only; frontends tokenize; the engine secret required), rill.v1.Admin
// (with an admin token) and gRPC health.
// The server listens before the model loads, so probes see NOT_SERVING
// during load. A model that fails to load, or a bad flag or file, exits 2
// (restarting cannot help) with its one-line reason also in
// --termination_message_path. SIGTERM/SIGINT aborts in-flight requests
// (finish_reason abort), drains the streams and exits 0; a dead engine exits
// 3 after --exit_when_dead_s so a supervisor restarts it.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/exit_message.h"
#include "base/flags_usage.h"
#include "base/metrics/http_server.h"
#include "base/tracing/span_exporter.h"
#include "base/port_file.h"
#include "base/secret_file.h"
#include "base/tls_credentials.h"
#include "engine/engine_flags.h"
#include "engine/service/engine_host.h"
#include "engine/service/engine_server.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on.");
ABSL_FLAG(int, port, 50061, "Port to listen on; 0 picks a free one (see --port_file).");
ABSL_FLAG(std::string, port_file, "", "Written with the chosen port once listening.");
ABSL_FLAG(std::string, termination_message_path, "",
          "When the engine cannot start (exit code 2: bad flag, file or model), its one-line "
          "reason is written here, like Kubernetes' terminationMessagePath.");
ABSL_FLAG(int, max_waiting_requests, 0, "Queue limit (RESOURCE_EXHAUSTED past it); 0 = none.");
ABSL_FLAG(double, exit_when_dead_s, 5, "Exit with code 3 once the engine is dead this long.");
ABSL_FLAG(double, debug_load_delay_s, 0, "Tests: stay in the loading state this long first.");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate: serve TLS (with --tls_key).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA: require client certificates it signed (mutual TLS, e.g. for frontends).");
ABSL_FLAG(std::string, engine_secret_file, "",
          "File holding the secret every rill.internal.Engine call must carry "
          "(`rill-engine-secret` metadata; rill serve writes one per run). Required unless "
          "--tls_client_ca makes the frontends present certificates.");
ABSL_FLAG(std::string, admin_token, "",
          "Serve rill.v1.Admin here, requiring `authorization: Bearer <token>`; empty (and no "
          "--admin_token_file): Admin is not served. Prefer --admin_token_file (`ps` shows flags).");
ABSL_FLAG(std::string, admin_token_file, "",
          "File holding the admin token (see --admin_token); no file at that path: no Admin.");
ABSL_FLAG(int, metrics_port, 0,
          "Serve Prometheus metrics (vLLM's names, see deploy/README.md) at "
          "http://<--host>:<port>/metrics; 0 = off.");
ABSL_FLAG(bool, vllm_api_without_credentials, false,
          "Serve vllm.grpc.engine.VllmEngine (the gateway protocol) without the engine "
          "credential, for a gateway on this machine that sends none; only with a loopback "
          "--host (rill.internal.Engine still needs the credential), or with "
          "--vllm_api_network_restricted.");
ABSL_FLAG(bool, vllm_api_network_restricted, false,
          "The operator states that the network lets only the gateway (and Rill's frontends) "
          "reach --port (e.g. a Kubernetes NetworkPolicy, see deploy/k8s/overlays/gateway): "
          "then --vllm_api_without_credentials may serve on a non-loopback --host. For "
          "gateways that send no credential (smg 1.13).");
ABSL_FLAG(std::string, profile_dir, "/tmp/rill-profile", "Default Admin.StartProfile dir.");
ABSL_FLAG(std::string, vllm_tokenizer_path, "",
          "Set by rill serve --openai_port: the tokenizer directory GetModelInfo names for "
          "the gateway (the files GetTokenizer ships, written where smg reads them); empty: "
          "the model's path.");
ABSL_FLAG(int, engine_restarts, 0,
          "Set by rill serve: how many times it has restarted a dead engine before this one "
          "(exported as rill:engine_restarts_total).");
// The engine options (--model, --kv_cache_mb, ...) are declared once in
// engine/engine_options.h and defined as flags by //engine:engine_flags.

namespace {

std::atomic<int> g_signal{0};
void OnSignal(int sig) { g_signal = sig; }

// Exit code 2 with `reason` logged and handed to the launcher.
int CannotStart(const std::string& reason) {
  LOG(ERROR) << reason;
  rill::base::WriteExitMessage(absl::GetFlag(FLAGS_termination_message_path), reason);
  return rill::base::kExitBadConfiguration;
}

}  // namespace

int main(int argc, char** argv) {
  rill::base::HandleHelpFlag(
      argc, argv,
      {"rill-engine [--flags]: an AsyncLLMEngine behind rill.internal.Engine, rill.v1.Admin and "
       "gRPC health (see README).",
       {"engine/service/engine_main.cc", rill::engine::EngineFlagsFile()}});
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;

  rill::engine::service::HostOptions options;
  options.args = rill::engine::EngineArgsFromFlags();
  if (absl::Status s = rill::engine::ValidateEngineArgs(options.args); !s.ok()) {
    return CannotStart(std::string(s.message()));
  }
  options.args.engine_restarts = std::max(0, absl::GetFlag(FLAGS_engine_restarts));
  options.model_name = options.args.model;
  options.vllm_tokenizer_path = absl::GetFlag(FLAGS_vllm_tokenizer_path);
  options.max_waiting_requests = absl::GetFlag(FLAGS_max_waiting_requests);
  options.load_delay = absl::Seconds(absl::GetFlag(FLAGS_debug_load_delay_s));

  // Declared before the host: callbacks export to it until the engine stops.
  absl::StatusOr<std::unique_ptr<rill::base::tracing::SpanExporter>> tracer =
      rill::base::tracing::CreateExporterIfEnabled(options.args.otlp_traces_endpoint, "rill-engine");
  if (!tracer.ok()) return CannotStart(std::string(tracer.status().message()));
  options.tracer = tracer->get();

  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);

  rill::engine::service::EngineHost host(options);
  const std::string address =
      absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port));
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      rill::base::MakeServerCredentials({absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                                         absl::GetFlag(FLAGS_tls_client_ca)});
  if (!credentials.ok()) return CannotStart(std::string(credentials.status().message()));
  // After the TLS files: a bad one is named first.
  rill::engine::service::EngineAuth auth;
  if (const std::string path = absl::GetFlag(FLAGS_engine_secret_file); !path.empty()) {
    absl::StatusOr<std::string> secret = rill::base::ReadSecretFile(path);
    if (!secret.ok()) {
      return CannotStart(absl::StrCat("--engine_secret_file: ", secret.status().message()));
    }
    auth.engine_secret = *secret;
  } else if (absl::GetFlag(FLAGS_tls_client_ca).empty()) {
    return CannotStart(
        "rill-engine needs a credential for its callers: --engine_secret_file=PATH (the "
        "frontends get the same file), or mutual TLS (--tls_cert, --tls_key, --tls_client_ca)");
  }
  auth.admin_token = absl::GetFlag(FLAGS_admin_token);
  if (absl::GetFlag(FLAGS_vllm_api_without_credentials)) {
    const std::string host = absl::GetFlag(FLAGS_host);
    const bool loopback =
        host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]";
    if (!loopback && !absl::GetFlag(FLAGS_vllm_api_network_restricted)) {
      return CannotStart(absl::StrCat("--vllm_api_without_credentials needs a loopback --host "
                                      "(127.0.0.1, localhost or ::1), not '",
                                      host,
                                      "', unless --vllm_api_network_restricted says a network "
                                      "policy lets only the gateway reach the port"));
    }
    if (!loopback) {
      LOG(WARNING) << "VllmEngine serves without a credential on " << host
                   << " (--vllm_api_network_restricted): only the network policy guards it";
    }
    auth.vllm_api_without_credentials = true;
  }
  if (const std::string path = absl::GetFlag(FLAGS_admin_token_file); !path.empty()) {
    absl::StatusOr<std::string> token = rill::base::ReadOptionalSecretFile(path);
    if (!token.ok()) {
      return CannotStart(absl::StrCat("--admin_token_file: ", token.status().message()));
    }
    auth.admin_token = *token;
  }

  rill::engine::service::EngineServer server(&host, address, absl::GetFlag(FLAGS_profile_dir),
                                     std::move(auth), *credentials);
  if (absl::Status s = server.Start(); !s.ok()) {
    LOG(ERROR) << s;
    return 1;
  }
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    if (absl::Status s = rill::base::WritePortFile(port_file, server.port()); !s.ok()) {
      LOG(ERROR) << s;
      return 1;
    }
  }
  // Empty until the engine has loaded (its families need the model's config).
  std::unique_ptr<rill::base::metrics::MetricsHttpServer> metrics;
  if (absl::Status s = rill::base::metrics::StartMetricsServerIfEnabled(
          absl::GetFlag(FLAGS_host), absl::GetFlag(FLAGS_metrics_port),
          [&host]() -> std::string {
            const rill::engine::AsyncEngine* engine = host.engine();
            return engine == nullptr ? std::string() : engine->Metrics().Exposition();
          },
          &metrics);
      !s.ok()) {
    return CannotStart(std::string(s.message()));
  }
  host.StartLoading();

  const absl::Duration dead_limit = absl::Seconds(absl::GetFlag(FLAGS_exit_when_dead_s));
  int exit_code = 0;
  while (g_signal == 0) {
    absl::SleepFor(absl::Milliseconds(100));
    // Nothing can be served, and waiting would only make a launcher or a
    // kubelet wait for readiness until its timeout.
    if (std::optional<absl::Status> load = host.LoadResult(); load && !load->ok()) {
      // EngineHost has logged it; the launcher gets it once more, on its own.
      exit_code = rill::base::kExitBadConfiguration;
      rill::base::WriteExitMessage(absl::GetFlag(FLAGS_termination_message_path),
                                   absl::StrCat("the model failed to load: ", load->message()));
      server.Shutdown(absl::ZeroDuration());
      std::fflush(nullptr);
      _exit(exit_code);
    }
    if (dead_limit > absl::ZeroDuration() && server.DeadFor() > dead_limit) {
      LOG(ERROR) << "the engine has been dead for " << dead_limit << ": "
                 << host.engine()->DeadError() << "; exiting with code 3";
      exit_code = 3;
      break;
    }
  }
  if (g_signal != 0 && !host.LoadResult().has_value()) {
    // Nothing runs yet: do not make Ctrl-C wait for the load to finish.
    LOG(INFO) << "signal " << g_signal << " while loading the model: exiting";
    std::fflush(nullptr);
    _exit(0);
  }
  if (g_signal != 0) LOG(INFO) << "signal " << g_signal << ": aborting requests and draining";
  (void)host.WaitLoaded();
  if (metrics != nullptr) metrics->Stop();  // No scrape may outlive the engine.
  host.Shutdown();  // Unfinished requests end with finish_reason abort.
  server.Shutdown(absl::Seconds(1));
  LOG(INFO) << "rill-engine exiting with code " << exit_code;
  // Skip static destructors of the model and gRPC (fast, no teardown races).
  std::fflush(nullptr);
  _exit(exit_code);
}
