// A child process started with fork/exec in its own process group, for
// launchers (`rill serve`, the engine's worker processes) and tests. Thread:
// one owner thread; not thread-safe.
#ifndef RILL_BASE_CHILD_PROCESS_H_
#define RILL_BASE_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace rill::base {

struct ChildOptions {
  // stdout+stderr go here when non-empty; else they are inherited.
  std::string log_path;
  // Append to log_path instead of truncating it (a restarted child keeps the
  // log of the one that died).
  bool append_log = false;
  // The child gets SIGKILL when the thread that started it dies, so a
  // crashed launcher leaves no orphans.
  bool kill_with_parent = true;
};

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // Kills the child's process group (SIGKILL) if it is still running.
  ~ChildProcess();

  // argv[0] is the program path. Fails if it is not executable.
  absl::Status Start(const std::vector<std::string>& argv, const ChildOptions& options);
  absl::Status Start(const std::vector<std::string>& argv, const std::string& log_path = "") {
    return Start(argv, ChildOptions{log_path});
  }

  // Sends `signal` and waits up to `timeout` for the exit; returns the exit
  // code (or 128 + signal number if killed by a signal).
  absl::StatusOr<int> Stop(int signal, absl::Duration timeout);

  // Waits up to `timeout` for the child to exit on its own; DeadlineExceeded
  // if it is still running (zero timeout: a poll).
  absl::StatusOr<int> Wait(absl::Duration timeout);

  // Sends `signal` to the child's whole process group (it and what it started).
  void SignalGroup(int signal);

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // The exit code of the last Wait/Stop that saw the exit (-1 before).
  int exit_code() const { return exit_code_; }

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
};

// "exit code 3", "signal 9 (Killed)": how a child ended, for error messages.
std::string DescribeExitCode(int code);

}  // namespace rill::base

#endif  // RILL_BASE_CHILD_PROCESS_H_
