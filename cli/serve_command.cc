#include "cli/serve_command.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/secret_file.h"
#include "base/tls_credentials.h"
#include "cli/common_flags.h"
#include "cli/server_launcher.h"
#include "grpc/health/v1/health.grpc.pb.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Client address to listen on.");
ABSL_FLAG(int, port, 50051, "Client port (all frontends share it); 0 picks a free one.");
ABSL_FLAG(int, frontends, 1, "Number of rill-frontend replicas.");
ABSL_FLAG(int, tensor_parallel_size, 1, "Worker processes (tensor-parallel ranks).");
ABSL_FLAG(std::string, admin_token, "",
          "Enables the Admin service on the frontends and the engine, guarded by this bearer "
          "token (handed to them in a 0600 file in the run dir).");
ABSL_FLAG(std::string, admin_token_file, "",
          "File holding the admin token (instead of --admin_token, which `ps` shows).");
ABSL_FLAG(std::vector<std::string>, engine_flags, {},
          "Extra rill-engine flags, comma-separated (e.g. --max_num_seqs=32).");
ABSL_FLAG(std::vector<std::string>, frontend_flags, {}, "Extra rill-frontend flags.");
ABSL_FLAG(std::vector<std::string>, lora, {},
          "LoRA adapters loaded at start-up: name=path,name=path (PEFT directories).");
ABSL_FLAG(std::string, lora_root, "",
          "Admin.AddLora may load adapters from under this directory only (empty: refused).");
ABSL_FLAG(std::string, run_dir, "", "Port files and logs; default a fresh /tmp/rill-serve.XXXXXX.");
ABSL_FLAG(bool, log_to_files, false, "Child logs go to <run_dir>/<name>.log instead of stderr.");
ABSL_FLAG(std::string, ready_file, "",
          "Written with the client address once every frontend reports SERVING.");
ABSL_FLAG(std::string, engine_binary, "", "Default: next to this binary or in bazel-bin.");
ABSL_FLAG(std::string, frontend_binary, "", "Default: next to this binary or in bazel-bin.");
ABSL_FLAG(std::string, tls_cert, "", "Frontends serve clients over TLS with this PEM certificate.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "Frontends require client certificates signed by this PEM CA (mutual TLS).");
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

// Translates the TLS flags into the children's flags; the files are checked
// here too so a bad one fails `rill serve` at once, naming it.
absl::Status AddTlsFlags(LaunchOptions* opts) {
  const base::TlsFiles client{absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                              absl::GetFlag(FLAGS_tls_client_ca)};
  if (!client.empty()) {
    if (absl::Status s = base::MakeServerCredentials(client).status(); !s.ok()) return s;
    opts->frontend_flags.push_back("--tls_cert=" + client.cert);
    opts->frontend_flags.push_back("--tls_key=" + client.key);
    if (!client.ca.empty()) opts->frontend_flags.push_back("--tls_client_ca=" + client.ca);
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

std::string MakeRunDir() {
  std::string dir = absl::GetFlag(FLAGS_run_dir);
  if (!dir.empty()) {
    // A given run dir may not exist yet (e.g. under a fresh bench/out); the
    // children's logs and port files go there.
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) LOG(ERROR) << "cannot create --run_dir " << dir << ": " << ec.message();
    return dir;
  }
  char tmpl[] = "/tmp/rill-serve.XXXXXX";
  const char* made = mkdtemp(tmpl);
  return made != nullptr ? made : "/tmp";
}

}  // namespace

int RunServe(int, char**) {
  // Block the stop signals before any thread exists; they are taken by
  // sigtimedwait below, so shutdown runs on this thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  LaunchOptions opts;
  opts.host = absl::GetFlag(FLAGS_host);
  opts.port = absl::GetFlag(FLAGS_port);
  opts.num_frontends = absl::GetFlag(FLAGS_frontends);
  opts.run_dir = MakeRunDir();
  opts.log_to_files = absl::GetFlag(FLAGS_log_to_files);
  opts.engine_binary = absl::GetFlag(FLAGS_engine_binary);
  if (opts.engine_binary.empty()) opts.engine_binary = FindRillBinary("rill-engine", "engine/service");
  opts.frontend_binary = absl::GetFlag(FLAGS_frontend_binary);
  if (opts.frontend_binary.empty()) opts.frontend_binary = FindRillBinary("rill-frontend", "frontend");
  opts.engine_flags = {
      "--model=" + absl::GetFlag(FLAGS_model),
      absl::StrCat("--threads=", absl::GetFlag(FLAGS_threads)),
      absl::StrCat("--tensor_parallel_size=", absl::GetFlag(FLAGS_tensor_parallel_size)),
      "--kv_cache_dtype=" + absl::GetFlag(FLAGS_kv_cache_dtype),
      "--device=" + absl::GetFlag(FLAGS_backend),
  };
  if (!absl::GetFlag(FLAGS_lora).empty()) {
    opts.engine_flags.push_back("--lora=" + absl::StrJoin(absl::GetFlag(FLAGS_lora), ","));
  }
  if (!absl::GetFlag(FLAGS_lora_root).empty()) {
    opts.engine_flags.push_back("--lora_root=" + absl::GetFlag(FLAGS_lora_root));
    // Adapters added at run time survive an engine restart (and, with a
    // fixed --run_dir, the next `rill serve`).
    opts.engine_flags.push_back("--lora_registry_file=" + opts.run_dir + "/lora_registry.json");
  }
  for (const std::string& f : absl::GetFlag(FLAGS_engine_flags)) opts.engine_flags.push_back(f);
  opts.admin_token = absl::GetFlag(FLAGS_admin_token);
  if (const std::string path = absl::GetFlag(FLAGS_admin_token_file); !path.empty()) {
    absl::StatusOr<std::string> token = base::ReadSecretFile(path);
    if (!token.ok()) {
      std::cerr << "rill serve: --admin_token_file: " << token.status().message() << "\n";
      return 2;
    }
    opts.admin_token = *token;
  }
  if (absl::Status s = AddTlsFlags(&opts); !s.ok()) {
    std::cerr << "rill serve: " << s.message() << "\n";
    return 2;
  }
  for (const std::string& f : absl::GetFlag(FLAGS_frontend_flags)) opts.frontend_flags.push_back(f);

  ServerLauncher launcher(opts);
  if (absl::Status s = launcher.Start(); !s.ok()) {
    std::cerr << "rill serve: " << s.message() << "\n";
    return 1;
  }
  absl::StatusOr<ReadinessProbe> probe = MakeProbe(launcher);
  if (!probe.ok()) {
    std::cerr << "rill serve: " << probe.status().message() << "\n";
    launcher.Stop();
    return 2;
  }
  std::cerr << "rill serve: " << opts.num_frontends << " frontend(s) on " << launcher.address()
            << ", engine on 127.0.0.1:" << launcher.engine_port() << " (run dir " << opts.run_dir
            << "); loading " << absl::GetFlag(FLAGS_model) << "...\n";

  bool ready = false;
  const absl::Time ready_deadline = absl::Now() + opts.start_timeout;
  int exit_code = 0;
  while (true) {
    const timespec tick{0, 200 * 1000 * 1000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      std::cerr << "rill serve: " << strsignal(sig) << ", shutting down\n";
      break;
    }
    if (absl::Status s = launcher.Supervise(); !s.ok()) {
      std::cerr << "rill serve: " << s.message() << "\n";
      exit_code = 1;
      break;
    }
    if (!ready && IsServing(*probe)) {
      ready = true;
      std::cout << "Rill is serving on " << launcher.address() << std::endl;
      const std::string ready_file = absl::GetFlag(FLAGS_ready_file);
      if (!ready_file.empty()) {
        FILE* f = std::fopen(ready_file.c_str(), "w");
        if (f != nullptr) {
          std::fprintf(f, "%s\n", launcher.address().c_str());
          std::fclose(f);
        }
      }
    } else if (!ready && absl::Now() > ready_deadline) {
      std::cerr << "rill serve: not SERVING after " << absl::FormatDuration(opts.start_timeout)
                << "; see the logs in " << opts.run_dir << "\n";
      exit_code = 1;
      break;
    }
  }
  launcher.Stop();
  return exit_code;
}

}  // namespace rill::cli
