// rill-frontend: the client-facing gRPC process. Today it serves health and
// reflection; the Inference and Admin services register here as they land.
#include <csignal>
#include <fstream>
#include <string>

#include <glog/logging.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "frontend/health_server.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on.");
ABSL_FLAG(int, port, 50051, "TCP port; 0 picks a free one (see --port_file).");
ABSL_FLAG(std::string, port_file, "",
          "If set, the bound port is written here once the server is up.");

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

  rill::frontend::HealthServer server(
      absl::StrCat(absl::GetFlag(FLAGS_host), ":", absl::GetFlag(FLAGS_port)));
  if (absl::Status s = server.Start(); !s.ok()) {
    LOG(ERROR) << s;
    return 1;
  }
  server.SetServing("", true);
  if (!absl::GetFlag(FLAGS_port_file).empty()) {
    std::ofstream(absl::GetFlag(FLAGS_port_file)) << server.port() << "\n";
  }

  int sig = 0;
  sigwait(&set, &sig);
  LOG(INFO) << "signal " << sig << ": shutting down";
  server.Shutdown();
  server.Wait();
  return 0;
}
