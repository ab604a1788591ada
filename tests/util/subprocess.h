// Test helper: start a binary as a child process (its own process group),
// wait for a file it writes when ready, and stop it. For integration tests
// that must cross real process boundaries.
#ifndef RILL_TESTS_UTIL_SUBPROCESS_H_
#define RILL_TESTS_UTIL_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace rill::testing {

class Subprocess {
 public:
  Subprocess() = default;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  // Kills the child (SIGKILL) if it is still running.
  ~Subprocess();

  // argv[0] is the program path. stdout+stderr go to `log_path` if non-empty.
  absl::Status Start(const std::vector<std::string>& argv, const std::string& log_path = "");

  // Sends `signal` and waits up to `timeout` for the exit; returns the exit
  // code (or 128 + signal number if killed by a signal).
  absl::StatusOr<int> Stop(int signal, absl::Duration timeout);

  // Waits up to `timeout` for the child to exit on its own.
  absl::StatusOr<int> Wait(absl::Duration timeout);

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// Polls until `path` exists and is non-empty, and returns its contents;
// fails after `timeout` or if `child` exits first.
absl::StatusOr<std::string> WaitForFile(const std::string& path, absl::Duration timeout,
                                        Subprocess* child = nullptr);

// $TEST_TMPDIR (Bazel) or /tmp.
std::string TestTempDir();

// Path of a data dependency given its workspace-relative path
// ("frontend/rill-frontend"), resolved through the Bazel runfiles tree.
std::string RunfilePath(const std::string& workspace_relative);

}  // namespace rill::testing

#endif  // RILL_TESTS_UTIL_SUBPROCESS_H_
