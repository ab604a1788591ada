// rill-frontend: the client-facing gRPC process. Serves rill.v1.Inference
// (and rill.v1.Admin with --admin_token), health and reflection, and speaks
// token ids to one engine over a single multiplexed stream.
#include <csignal>
#include <fstream>
#include <string>

#include <glog/logging.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "frontend/frontend_server.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on.");
ABSL_FLAG(int, port, 50051,
          "TCP port; 0 picks a free one (see --port_file). Several frontends may "
          "share one port (SO_REUSEPORT, gRPC's default on Linux).");
ABSL_FLAG(std::string, port_file, "",
          "If set, the bound port is written here once the server is up.");
ABSL_FLAG(std::string, engine, "127.0.0.1:50052", "The engine's host:port.");
ABSL_FLAG(std::string, frontend_id, "0",
          "This replica's id: prefixes server-assigned request ids, reported by GetLoad.");
ABSL_FLAG(std::string, admin_token, "",
          "Serve rill.v1.Admin, requiring `authorization: Bearer <token>`. Empty: no Admin.");
ABSL_FLAG(int, engine_wait_s, 120, "How long to wait for the engine at start.");

int main(int argc, char** argv) {
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
  opts.engine_wait = absl::Seconds(absl::GetFlag(FLAGS_engine_wait_s));
  rill::frontend::FrontendServer server(opts);
  if (absl::Status s = server.Start(); !s.ok()) {
    LOG(ERROR) << s;
    return 1;
  }
  if (!absl::GetFlag(FLAGS_port_file).empty()) {
    std::string tmp = absl::GetFlag(FLAGS_port_file) + ".tmp";
    std::ofstream(tmp) << server.port() << "\n";
    std::rename(tmp.c_str(), absl::GetFlag(FLAGS_port_file).c_str());
  }

  int sig = 0;
  sigwait(&set, &sig);
  LOG(INFO) << "signal " << sig << ": shutting down";
  server.Shutdown();
  server.Wait();
  return 0;
}
