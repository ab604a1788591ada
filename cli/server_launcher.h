// Starts and supervises the processes of one Rill deployment on this machine
// (`rill serve`): one rill-engine (which starts its tensor-parallel workers)
// and N rill-frontend replicas sharing one client port. The port is reserved
// first (base/port_reservation.h): a port another server holds fails Start,
// and the frontends bind it with SO_REUSEPORT so the kernel spreads
// connections over them. A child that exits unexpectedly is restarted on the
// same port with backoff, unless it exited with code 2 (it cannot start with
// this configuration). Thread: one owner thread.
//
// Credentials never go on a command line (`ps` shows them): each Start
// writes a fresh random engine secret (and the admin token, if any) to 0600
// files in the run dir, hands the children their paths
// (--engine_secret_file, --admin_token_file) and removes them at Stop.
#ifndef RILL_CLI_SERVER_LAUNCHER_H_
#define RILL_CLI_SERVER_LAUNCHER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/child_process.h"
#include "base/port_reservation.h"

namespace rill::cli {

struct LaunchOptions {
  std::string host = "127.0.0.1";
  int port = 50051;  // Client port; 0 picks a free one.
  int num_frontends = 1;
  // > 0: Prometheus /metrics of the engine on 127.0.0.1:metrics_port and of
  // frontend i on host:(metrics_port + 1 + i). 0: off.
  int metrics_port = 0;
  std::string engine_binary;
  std::string frontend_binary;
  std::vector<std::string> engine_flags;    // Passed to rill-engine as given.
  std::vector<std::string> frontend_flags;  // Passed to every rill-frontend.
  // Non-empty: rill.v1.Admin on the frontends and the engine, guarded by it.
  std::string admin_token;
  std::string run_dir;  // Port files, exit messages and (with log_to_files) child logs.
  bool log_to_files = false;
  bool restart = true;  // Restart children that die.
  absl::Duration start_timeout = absl::Seconds(120);
  // On Stop: how long the frontends let running requests finish (their
  // --shutdown_grace_ms) before they end the rest with finish_reason ABORT.
  absl::Duration shutdown_grace = absl::Seconds(30);
};

class ServerLauncher {
 public:
  explicit ServerLauncher(LaunchOptions options) : options_(std::move(options)) {}
  ~ServerLauncher();  // Stop(), if still running.

  // Reserves the client port, starts the engine, waits for its port, starts
  // the frontends and waits for theirs (they listen once the engine has
  // loaded the model). On failure everything started is stopped again:
  // FailedPrecondition when the port is in use or a child exited with code
  // 2 (its one-line reason in the message, e.g. the model failed to load),
  // Cancelled when `interrupted` (polled every 20 ms) returned true.
  absl::Status Start(const std::function<bool()>& interrupted = nullptr);
  // The client address ("host:port") once Start succeeded.
  std::string address() const;
  int engine_port() const { return engine_port_; }

  // Reaps children that exited and restarts them (if options.restart).
  // Returns an error when a child keeps dying (5 restarts within a minute)
  // or exited with code 2 (FailedPrecondition with its reason).
  absl::Status Supervise();

  // The first step of a graceful stop, for rolling upgrades: SIGTERM to
  // every frontend at once, which report NOT_SERVING, stop accepting and let
  // running requests finish within options.shutdown_grace. Returns at once.
  void BeginDrain();
  // True once every frontend has exited (after BeginDrain).
  bool Drained();

  // Stops everything: drains the frontends (BeginDrain, unless already
  // begun) and waits for them up to the grace period, unless `immediately`;
  // then SIGTERM to the engine, which ends what still runs with
  // finish_reason ABORT; SIGKILL to process groups that outlive that.
  // Frontends that are not listening yet are killed at once.
  void Stop(bool immediately = false);

 private:
  struct Child {
    std::string name;
    std::vector<std::string> argv;
    std::string port_file;
    std::string exit_message_file;  // Empty: the child writes none.
    std::unique_ptr<base::ChildProcess> process;
    std::vector<absl::Time> restarts;
  };

  // `restart_reason` non-empty: a restart; the child's log is kept and
  // appended to, after a marker line naming the reason.
  absl::Status StartChild(Child* child, const std::string& restart_reason = "");
  // Waits for the child's port file; returns the port. Fails at once when
  // the child, or the engine while a frontend starts, exits.
  absl::StatusOr<int> WaitForPort(Child* child, const std::function<bool()>& interrupted);
  // Why `child` exited with `code`, for the user.
  absl::Status ExitError(const Child& child, int code, const std::string& when) const;
  // SIGTERM (unless already sent), up to `wait` for the exit, then SIGKILL.
  void StopChild(Child* child, bool send_sigterm, absl::Duration wait);

  // Writes the credential files and adds their flags to both argv templates.
  absl::Status WriteCredentials(std::vector<std::string>* engine_argv,
                                std::vector<std::string>* frontend_argv);

  LaunchOptions options_;
  base::PortReservation client_port_reservation_;
  std::vector<std::string> credential_files_;  // Removed at Stop.
  Child engine_;
  std::vector<Child> frontends_;
  int engine_port_ = 0;
  int client_port_ = 0;
  // Restarts of the engine so far; each new engine gets the count
  // (--engine_restarts) and exports it as rill:engine_restarts_total.
  int engine_restarts_ = 0;
  bool started_ = false;
  bool draining_ = false;
  absl::Time drain_deadline_;
};

// Path of a sibling binary: next to the running executable, else in the
// Bazel layout (bazel-bin/<package>/<name>), else empty.
std::string FindRillBinary(const std::string& name, const std::string& bazel_package);

}  // namespace rill::cli

#endif  // RILL_CLI_SERVER_LAUNCHER_H_
