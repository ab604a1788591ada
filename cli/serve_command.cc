#include "cli/serve_command.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include "absl/cleanup/cleanup.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/secret_file.h"
#include "base/tls_credentials.h"
#include "cli/common_flags.h"
#include "cli/engine_replicas.h"
#include "cli/openai_gateway.h"
#include "cli/server_launcher.h"
#include "engine/engine_flags.h"
#include "engine/model_path.h"
#include "engine/service/tokenizer_zip.h"
#include "frontend/frontend_args.h"
#include "frontend/frontend_flags.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rill/internal/engine.grpc.pb.h"
#include "rill/v1/inference.grpc.pb.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Client address to listen on.");
ABSL_FLAG(int, port, 50051,
          "Client port (all frontends share it); 0 picks a free one. A port another server "
          "holds fails at start-up (exit code 2).");
ABSL_FLAG(int, frontends, 1, "Number of rill-frontend replicas.");
ABSL_FLAG(int, metrics_port, 0,
          "Prometheus /metrics: the engine's (vllm:...) on 127.0.0.1:<port>, frontend i's "
          "(rill:frontend_...) on <--host>:<port + 1 + i>; 0 = off.");
ABSL_FLAG(std::string, admin_token, "",
          "Enables the Admin service on the frontends and the engine, guarded by this bearer "
          "token (handed to them in a 0600 file in the run dir).");
ABSL_FLAG(std::string, admin_token_file, "",
          "File holding the admin token (instead of --admin_token, which `ps` shows).");
ABSL_FLAG(std::vector<std::string>, engine_flags, {},
          "Other rill-engine flags, comma-separated (e.g. --max_waiting_requests=100). Engine "
          "options (--kv_cache_mb, --max_num_seqs, ...) are flags of rill serve itself.");
ABSL_FLAG(std::vector<std::string>, frontend_flags, {},
          "Other rill-frontend flags, comma-separated. Frontend options (--max_n, "
          "--client_send_buffer, --tls_cert, ...) are flags of rill serve itself.");
ABSL_FLAG(std::string, run_dir, "",
          "Port files and logs; default a fresh $TMPDIR/rill-serve.XXXXXX (/tmp), removed at "
          "exit (kept with --log_to_files).");
ABSL_FLAG(bool, log_to_files, false, "Child logs go to <run_dir>/<name>.log instead of stderr.");
ABSL_FLAG(int, shutdown_grace_ms, 30000,
          "On SIGTERM/SIGINT: health turns NOT_SERVING, new requests are refused, and running "
          "requests get this long to finish before the rest end with finish_reason ABORT; "
          "a second signal stops at once.");
ABSL_FLAG(std::string, ready_file, "",
          "Written with the client address once every frontend reports SERVING.");
ABSL_FLAG(int, openai_port, 0,
          "Also serve the OpenAI-compatible HTTP API on this port (0: off): the Shepherd Model "
          "Gateway (smg, from the project venv) in front of the engine's VllmEngine service.");
ABSL_FLAG(std::string, openai_host, "127.0.0.1", "Address the OpenAI API listens on.");
ABSL_FLAG(std::string, openai_admin_key_file, "",
          "With --openai_port: file holding the key of the gateway's control plane (POST/DELETE "
          "/workers, /flush_cache, profiling; sent as `Authorization: Bearer <key>`). Default: a "
          "fresh random key in <run_dir>/smg-admin.key (0600).");
ABSL_FLAG(int, engines, 1,
          "With --openai_port: data-parallel rill-engine processes (each with its own KV cache "
          "and threads) behind the gateway's cache-aware routing; the native gRPC frontends "
          "use the first.");
ABSL_FLAG(std::string, engine_binary, "", "Default: next to this binary or in bazel-bin.");
ABSL_FLAG(std::string, frontend_binary, "", "Default: next to this binary or in bazel-bin.");
// The client TLS flags (--tls_cert, --tls_key, --tls_client_ca) are frontend
// options, declared in frontend/frontend_options.h like every option passed
// on to the frontends.
ABSL_FLAG(std::string, engine_tls_cert, "",
          "Mutual TLS between frontends and engine: the engine's certificate, also the "
          "frontends' client certificate (one certificate for both is fine on loopback).");
ABSL_FLAG(std::string, engine_tls_key, "", "PEM private key for --engine_tls_cert.");
ABSL_FLAG(std::string, engine_tls_ca, "",
          "PEM CA that signed --engine_tls_cert: each side verifies the other with it.");
ABSL_FLAG(std::string, engine_tls_server_name, "",
          "Name in --engine_tls_cert if it does not cover 127.0.0.1.");

namespace rill::cli {
namespace {

// How `rill serve` checks readiness: the frontends' overall health over
// plaintext (SERVING once the engine has loaded the model and the frontend is
// connected to it). With client-facing TLS it holds no CA or client
// certificate for the frontends, so it asks the engine instead, with the
// internal credentials (the frontends listen only once the engine answered).
struct ReadinessProbe {
  std::string address;
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  std::string tls_server_name;
};

bool IsServing(const ReadinessProbe& probe) {
  grpc::ChannelArguments args;
  if (!probe.tls_server_name.empty()) args.SetSslTargetNameOverride(probe.tls_server_name);
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateCustomChannel(probe.address, probe.credentials, args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  return stub->Check(&ctx, req, &resp).ok() &&
         resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

// Translates the frontend<->engine TLS flags into the children's flags. The
// files are checked here, the clients' too (those reach the frontends as
// frontend options), so a bad one fails `rill serve` at once, naming it.
absl::Status AddTlsFlags(LaunchOptions* opts) {
  const base::TlsFiles client{absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                              absl::GetFlag(FLAGS_tls_client_ca)};
  if (!client.empty()) {
    if (absl::Status s = base::MakeServerCredentials(client).status(); !s.ok()) return s;
  }
  const base::TlsFiles internal{absl::GetFlag(FLAGS_engine_tls_cert),
                                absl::GetFlag(FLAGS_engine_tls_key),
                                absl::GetFlag(FLAGS_engine_tls_ca)};
  if (internal.empty()) return absl::OkStatus();
  if (internal.cert.empty() || internal.key.empty() || internal.ca.empty()) {
    return absl::InvalidArgumentError(
        "frontend<->engine TLS needs all of --engine_tls_cert, --engine_tls_key and "
        "--engine_tls_ca");
  }
  if (absl::Status s = base::MakeServerCredentials(internal).status(); !s.ok()) return s;
  opts->engine_flags.push_back("--tls_cert=" + internal.cert);
  opts->engine_flags.push_back("--tls_key=" + internal.key);
  opts->engine_flags.push_back("--tls_client_ca=" + internal.ca);
  opts->frontend_flags.push_back("--engine_tls_cert=" + internal.cert);
  opts->frontend_flags.push_back("--engine_tls_key=" + internal.key);
  opts->frontend_flags.push_back("--engine_tls_ca=" + internal.ca);
  if (const std::string name = absl::GetFlag(FLAGS_engine_tls_server_name); !name.empty()) {
    opts->frontend_flags.push_back("--engine_tls_server_name=" + name);
  }
  return absl::OkStatus();
}

absl::StatusOr<ReadinessProbe> MakeProbe(const ServerLauncher& launcher) {
  ReadinessProbe probe;
  if (absl::GetFlag(FLAGS_tls_cert).empty()) {
    probe.address = launcher.address();
    return probe;
  }
  probe.address = absl::StrCat("127.0.0.1:", launcher.engine_port());
  const base::TlsFiles internal{absl::GetFlag(FLAGS_engine_tls_cert),
                                absl::GetFlag(FLAGS_engine_tls_key),
                                absl::GetFlag(FLAGS_engine_tls_ca)};
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      base::MakeChannelCredentials(internal);
  if (!creds.ok()) return creds.status();
  probe.credentials = *creds;
  probe.tls_server_name = absl::GetFlag(FLAGS_engine_tls_server_name);
  return probe;
}

// For a Hugging Face directory model: the tokenizer files the engine's
// GetTokenizer would ship (tokenizer.json without padding/truncation), written
// to <run_dir>/gateway-tokenizer; the engines name it as their tokenizer
// path (--vllm_tokenizer_path), which smg reads from disk. Without it smg
// reads the model directory's own tokenizer.json, and a sentence-transformers
// file pads every input to 128 [PAD] tokens, which the engine then embeds.
// A GGUF model gives "" (smg asks the engine through GetTokenizer).
absl::StatusOr<std::string> WriteGatewayTokenizer(const std::string& run_dir) {
  const std::string model = engine::ResolveModelPath(absl::GetFlag(FLAGS_model));
  std::error_code ec;
  if (!std::filesystem::is_directory(model, ec)) return std::string();
  absl::StatusOr<std::vector<engine::service::ZipEntry>> files =
      engine::service::TokenizerArtifacts(model);
  if (!files.ok()) {
    // smg then reads the model directory itself, as it would anyway.
    LOG(WARNING) << "the gateway reads the model's own tokenizer files: "
                 << files.status().message();
    return std::string();
  }
  const std::string dir = run_dir + "/gateway-tokenizer";
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  for (const engine::service::ZipEntry& f : *files) {
    std::ofstream out(dir + "/" + f.name, std::ios::binary | std::ios::trunc);
    out << f.data;
    if (!out.good()) return absl::UnavailableError(absl::StrCat("cannot write ", dir, "/", f.name));
  }
  return dir;
}

// The user's --run_dir (owned false), or a fresh one made here, removed at
// exit (owned true).
struct RunDir {
  std::string path;
  bool owned = false;
};

RunDir MakeRunDir() {
  std::string dir = absl::GetFlag(FLAGS_run_dir);
  if (!dir.empty()) {
    // A given run dir may not exist yet (e.g. under a fresh bench/out); the
    // children's logs and port files go there.
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) LOG(ERROR) << "cannot create --run_dir " << dir << ": " << ec.message();
    return {dir, false};
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/rill-serve.XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) return {"/tmp", false};
  return {tmpl, true};
}

// One line about what serves, from the config RPC of the endpoint readiness
// was checked on: "<model path> (backend cpu, KV cache 512 MiB float32)".
std::string DescribeServing(const ReadinessProbe& probe, bool via_engine) {
  grpc::ChannelArguments args;
  if (!probe.tls_server_name.empty()) args.SetSslTargetNameOverride(probe.tls_server_name);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(probe.address, probe.credentials, args);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ServerConfig config;
  const grpc::Status s =
      via_engine ? internal::Engine::NewStub(channel)->GetServerConfig(&ctx, {}, &config)
                 : v1::Inference::NewStub(channel)->GetServerConfig(&ctx, {}, &config);
  if (!s.ok()) return engine::ResolveModelPath(absl::GetFlag(FLAGS_model));
  return absl::StrCat(config.engine().model_path(), " (backend ", config.engine().backend(),
                      ", KV cache ", config.cache().kv_cache_bytes() >> 20, " MiB ",
                      config.cache().kv_cache_dtype(), ")");
}

void WriteReadyFile(const std::string& address) {
  const std::string ready_file = absl::GetFlag(FLAGS_ready_file);
  if (ready_file.empty()) return;
  FILE* f = std::fopen(ready_file.c_str(), "w");
  if (f != nullptr) {
    std::fprintf(f, "%s\n", address.c_str());
    std::fclose(f);
  }
}

// A start-up failure the user must fix (port in use, bad model, flag or
// file) is exit code 2, like a bad flag; anything else 1.
int ExitCodeFor(const absl::Status& s) {
  return absl::IsFailedPrecondition(s) || absl::IsInvalidArgument(s) ? 2 : 1;
}

// Serves until a stop signal or a fatal child failure; returns the exit
// code. `stop_signals` are blocked and taken here with sigtimedwait.
int Serve(LaunchOptions opts, const sigset_t& stop_signals) {
  const std::string run_dir = opts.run_dir;
  EngineReplicaOptions replica_options;
  replica_options.engine_binary = opts.engine_binary;
  replica_options.engine_flags = opts.engine_flags;
  replica_options.secret_file = opts.run_dir + "/engine.secret";
  replica_options.run_dir = opts.run_dir;
  replica_options.log_to_files = opts.log_to_files;
  replica_options.count = absl::GetFlag(FLAGS_engines) - 1;
  int stop_signal = 0;
  // Polled while starting, so Ctrl-C works while the model loads.
  auto take_signal = [&stop_signals, &stop_signal](absl::Duration wait) {
    const timespec ts = absl::ToTimespec(wait);
    const int sig = sigtimedwait(&stop_signals, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) stop_signal = sig;
    return sig == SIGINT || sig == SIGTERM;
  };
  const int num_frontends = opts.num_frontends;
  std::cerr << "rill serve: starting with " << engine::ResolveModelPath(absl::GetFlag(FLAGS_model))
            << "\n";
  ServerLauncher launcher(std::move(opts));
  if (absl::Status s = launcher.Start([&] { return take_signal(absl::ZeroDuration()); });
      !s.ok()) {
    if (absl::IsCancelled(s)) {
      std::cerr << "rill serve: " << strsignal(stop_signal) << " during start-up; stopped\n";
      return 128 + stop_signal;
    }
    std::cerr << "rill serve: " << s.message() << "\n";
    return ExitCodeFor(s);
  }
  absl::StatusOr<ReadinessProbe> probe = MakeProbe(launcher);
  if (!probe.ok()) {
    std::cerr << "rill serve: " << probe.status().message() << "\n";
    launcher.Stop(/*immediately=*/true);
    return 2;
  }
  EngineReplicas replicas;
  if (replica_options.count > 0) {
    if (absl::Status s = replicas.Start(replica_options); !s.ok()) {
      std::cerr << "rill serve: " << s.message() << "\n";
      launcher.Stop(/*immediately=*/true);
      return ExitCodeFor(s);
    }
  }
  OpenAiGateway gateway;
  if (const int port = absl::GetFlag(FLAGS_openai_port); port > 0) {
    OpenAiGatewayOptions g;
    g.python = VenvPython();
    g.host = absl::GetFlag(FLAGS_openai_host);
    g.port = port;
    g.admin_key_file = absl::GetFlag(FLAGS_openai_admin_key_file);
    if (g.admin_key_file.empty()) {
      g.admin_key_file = run_dir + "/smg-admin.key";
      absl::StatusOr<std::string> key = base::NewRandomSecret();
      absl::Status s = key.ok() ? base::WriteSecretFile(g.admin_key_file, *key) : key.status();
      if (!s.ok()) {
        std::cerr << "rill serve: the gateway's control-plane key: " << s.message() << "\n";
        launcher.Stop(/*immediately=*/true);
        return 1;
      }
    }
    g.engine_addresses = {absl::StrCat("127.0.0.1:", launcher.engine_port())};
    for (const std::string& a : replicas.addresses()) g.engine_addresses.push_back(a);
    if (absl::GetFlag(FLAGS_log_to_files)) g.log_path = run_dir + "/smg.log";
    if (absl::Status s = gateway.Start(g); !s.ok()) {
      std::cerr << "rill serve: " << s.message() << "\n";
      launcher.Stop(/*immediately=*/true);
      return ExitCodeFor(s);
    }
    std::cout << "OpenAI-compatible API on " << gateway.url() << " (control-plane key in "
              << g.admin_key_file << ")" << std::endl;
  }
  const bool probe_via_engine = !absl::GetFlag(FLAGS_tls_cert).empty();

  bool ready = false;
  const absl::Time ready_deadline = absl::Now() + absl::Seconds(120);
  while (true) {
    if (take_signal(absl::Milliseconds(200))) break;
    if (absl::Status s = launcher.Supervise(); !s.ok()) {
      std::cerr << "rill serve: " << s.message() << "\n";
      gateway.Stop();
      launcher.Stop(/*immediately=*/true);
      return ExitCodeFor(s);
    }
    replicas.Supervise();
    if (absl::GetFlag(FLAGS_openai_port) > 0) {
      if (absl::Status s = gateway.Check(); !s.ok()) {
        std::cerr << "rill serve: " << s.message() << "\n";
        launcher.Stop(/*immediately=*/true);
        return 1;
      }
    }
    if (!ready && IsServing(*probe)) {
      ready = true;
      std::cout << "Rill is serving " << DescribeServing(*probe, probe_via_engine) << " on "
                << launcher.address() << " (" << num_frontends << " frontend"
                << (num_frontends == 1 ? "" : "s") << ")" << std::endl;
      WriteReadyFile(launcher.address());
    } else if (!ready && absl::Now() > ready_deadline) {
      std::cerr << "rill serve: the frontends listen but are not SERVING after 2m\n";
      launcher.Stop(/*immediately=*/true);
      return 1;
    }
  }
  // Rolling upgrades: stop taking requests, let the running ones finish.
  const absl::Duration grace = absl::Milliseconds(absl::GetFlag(FLAGS_shutdown_grace_ms));
  std::cerr << "rill serve: " << strsignal(stop_signal) << ", draining (running requests get up to "
            << absl::FormatDuration(grace) << "; signal again to stop now)\n";
  gateway.Stop();  // New HTTP requests are refused; the frontends drain.
  launcher.BeginDrain();
  bool immediately = false;
  // The frontends end what is left after the grace themselves; Stop kills
  // one that does not.
  const absl::Time drain_deadline = absl::Now() + grace + absl::Seconds(5);
  while (!launcher.Drained() && absl::Now() < drain_deadline) {
    if (take_signal(absl::Milliseconds(100))) {
      std::cerr << "rill serve: " << strsignal(stop_signal) << " again, stopping now\n";
      immediately = true;
      break;
    }
  }
  launcher.Stop(immediately);
  replicas.Stop();
  std::cerr << "rill serve: stopped\n";
  return 0;
}

}  // namespace

int RunServe(int, char**) {
  // A bad engine option is named at once, before any child starts (the
  // engine checks again, --engine_flags included).
  if (absl::Status s = engine::ValidateEngineArgs(engine::EngineArgsFromFlags()); !s.ok()) {
    std::cerr << "rill serve: " << s.message() << "\n";
    return 2;
  }
  // The same for the frontend options (its launch options keep their
  // defaults here: rill serve sets them per frontend).
  frontend::FrontendArgs frontend_args;
  frontend::ReadFrontendFlags(&frontend_args);
  if (absl::Status s = frontend::ValidateFrontendArgs(frontend_args); !s.ok()) {
    std::cerr << "rill serve: " << s.message() << "\n";
    return 2;
  }
  // Block the stop signals before any thread exists; they are taken by
  // sigtimedwait in Serve, so shutdown runs on this thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const RunDir run_dir = MakeRunDir();
  // Our own temporary directory goes at exit, whatever the way out; with
  // --log_to_files it holds what the user asked to keep.
  absl::Cleanup remove_run_dir = [&run_dir] {
    if (!run_dir.owned) return;
    if (absl::GetFlag(FLAGS_log_to_files)) {
      std::cerr << "rill serve: logs kept in " << run_dir.path << "\n";
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(run_dir.path, ec);
  };

  LaunchOptions opts;
  opts.host = absl::GetFlag(FLAGS_host);
  opts.port = absl::GetFlag(FLAGS_port);
  opts.num_frontends = absl::GetFlag(FLAGS_frontends);
  opts.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  if (opts.metrics_port < 0 || opts.metrics_port + opts.num_frontends > 65535) {
    std::cerr << "rill serve: --metrics_port must be 0 (off) or a port with room for "
              << opts.num_frontends << " frontend port(s) after it\n";
    return 2;
  }
  opts.run_dir = run_dir.path;
  opts.log_to_files = absl::GetFlag(FLAGS_log_to_files);
  opts.shutdown_grace = absl::Milliseconds(absl::GetFlag(FLAGS_shutdown_grace_ms));
  opts.engine_binary = absl::GetFlag(FLAGS_engine_binary);
  if (opts.engine_binary.empty()) opts.engine_binary = FindRillBinary("rill-engine", "engine/service");
  opts.frontend_binary = absl::GetFlag(FLAGS_frontend_binary);
  if (opts.frontend_binary.empty()) opts.frontend_binary = FindRillBinary("rill-frontend", "frontend");
  // Every engine option the user set here (they are this binary's flags
  // too, from the same declaration) goes to rill-engine as given.
  opts.engine_flags = engine::EngineFlagsChangedFromDefault();
  if (!absl::GetFlag(FLAGS_lora_root).empty() && absl::GetFlag(FLAGS_lora_registry_file).empty()) {
    // Adapters added at run time survive an engine restart (and, with a
    // fixed --run_dir, the next `rill serve`).
    opts.engine_flags.push_back("--lora_registry_file=" + opts.run_dir + "/lora_registry.json");
  }
  for (const std::string& f : absl::GetFlag(FLAGS_engine_flags)) opts.engine_flags.push_back(f);
  if (absl::GetFlag(FLAGS_engines) < 1 ||
      (absl::GetFlag(FLAGS_engines) > 1 && absl::GetFlag(FLAGS_openai_port) <= 0)) {
    std::cerr << "rill serve: --engines must be >= 1, and above 1 only with --openai_port (the "
                 "gateway routes over them)\n";
    return 2;
  }
  if (const std::string path = absl::GetFlag(FLAGS_openai_admin_key_file); !path.empty()) {
    if (absl::StatusOr<std::string> key = base::ReadSecretFile(path); !key.ok()) {
      std::cerr << "rill serve: --openai_admin_key_file: " << key.status().message() << "\n";
      return 2;
    }
  }
  // smg 1.13 sends no credential to gRPC workers: the engine (on loopback)
  // takes VllmEngine calls without one; its own API keeps the secret.
  if (absl::GetFlag(FLAGS_openai_port) > 0) {
    opts.engine_flags.push_back("--vllm_api_without_credentials");
    absl::StatusOr<std::string> dir = WriteGatewayTokenizer(opts.run_dir);
    if (!dir.ok()) {
      std::cerr << "rill serve: the gateway's tokenizer: " << dir.status().message() << "\n";
      return 1;
    }
    if (!dir->empty()) opts.engine_flags.push_back("--vllm_tokenizer_path=" + *dir);
  }
  opts.admin_token = absl::GetFlag(FLAGS_admin_token);
  if (const std::string path = absl::GetFlag(FLAGS_admin_token_file); !path.empty()) {
    absl::StatusOr<std::string> token = base::ReadSecretFile(path);
    if (!token.ok()) {
      std::cerr << "rill serve: --admin_token_file: " << token.status().message() << "\n";
      return 2;
    }
    opts.admin_token = *token;
  }
  // Every frontend option the user set here (this binary's flags too, from
  // the same declaration) goes to each rill-frontend as given.
  opts.frontend_flags = frontend::FrontendFlagsChangedFromDefault();
  if (absl::Status s = AddTlsFlags(&opts); !s.ok()) {
    std::cerr << "rill serve: " << s.message() << "\n";
    return 2;
  }
  // --otlp_traces_endpoint is an engine option; the frontends export their
  // request spans (the engine spans' parents) to the same collector.
  if (const std::string traces = engine::EngineArgsFromFlags().otlp_traces_endpoint; !traces.empty()) {
    opts.frontend_flags.push_back("--otlp_traces_endpoint=" + traces);
  }
  for (const std::string& f : absl::GetFlag(FLAGS_frontend_flags)) opts.frontend_flags.push_back(f);
  return Serve(std::move(opts), stop_signals);
}

}  // namespace rill::cli
