// Starts and supervises the processes of one Rill deployment on this machine
// (`rill serve`): one rill-engine (which starts its tensor-parallel workers)
// and N rill-frontend replicas sharing one client port (gRPC sets
// SO_REUSEPORT, so the kernel spreads connections over them). A child that
// exits unexpectedly is restarted on the same port with backoff. Thread: one
// owner thread.
#ifndef RILL_CLI_SERVER_LAUNCHER_H_
#define RILL_CLI_SERVER_LAUNCHER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/child_process.h"

namespace rill::cli {

struct LaunchOptions {
  std::string host = "127.0.0.1";
  int port = 50051;  // Client port; 0 picks a free one.
  int num_frontends = 1;
  std::string engine_binary;
  std::string frontend_binary;
  std::vector<std::string> engine_flags;    // Passed to rill-engine as given.
  std::vector<std::string> frontend_flags;  // Passed to every rill-frontend.
  std::string run_dir;  // Port files and (with log_to_files) child logs.
  bool log_to_files = false;
  bool restart = true;  // Restart children that die.
  absl::Duration start_timeout = absl::Seconds(120);
};

class ServerLauncher {
 public:
  explicit ServerLauncher(LaunchOptions options) : options_(std::move(options)) {}
  ~ServerLauncher();  // Stop(), if still running.

  // Starts the engine, waits for its port, starts the frontends and waits
  // for theirs. On failure everything started is stopped again.
  absl::Status Start();
  // The client address ("host:port") once Start succeeded.
  std::string address() const;
  int engine_port() const { return engine_port_; }

  // Reaps children that exited and restarts them (if options.restart).
  // Returns an error when a child keeps dying (5 restarts within a minute).
  absl::Status Supervise();

  // SIGTERM to the engine first (it ends in-flight requests as "abort" and
  // the frontends forward that), then to the frontends; SIGKILL to process
  // groups that outlive `grace`.
  void Stop(absl::Duration grace = absl::Seconds(15));

 private:
  struct Child {
    std::string name;
    std::vector<std::string> argv;
    std::string port_file;
    std::unique_ptr<base::ChildProcess> process;
    std::vector<absl::Time> restarts;
  };

  // `restart_reason` non-empty: a restart; the child's log is kept and
  // appended to, after a marker line naming the reason.
  absl::Status StartChild(Child* child, const std::string& restart_reason = "");
  // Waits for the child's port file; returns the port.
  absl::StatusOr<int> WaitForPort(Child* child);

  LaunchOptions options_;
  Child engine_;
  std::vector<Child> frontends_;
  int engine_port_ = 0;
  int client_port_ = 0;
  bool started_ = false;
};

// Path of a sibling binary: next to the running executable, else in the
// Bazel layout (bazel-bin/<package>/<name>), else empty.
std::string FindRillBinary(const std::string& name, const std::string& bazel_package);

}  // namespace rill::cli

#endif  // RILL_CLI_SERVER_LAUNCHER_H_
