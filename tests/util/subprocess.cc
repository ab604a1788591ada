#include "tests/util/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace rill::testing {
namespace {

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

Subprocess::~Subprocess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

absl::Status Subprocess::Start(const std::vector<std::string>& argv,
                               const std::string& log_path) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  std::vector<char*> c_argv;
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);
    if (!log_path.empty()) {
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
    }
    execv(c_argv[0], c_argv.data());
    _exit(127);
  }
  pid_ = pid;
  return absl::OkStatus();
}

absl::StatusOr<int> Subprocess::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("not running");
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return DecodeWaitStatus(status);
    }
    if (r < 0) return absl::InternalError(absl::StrCat("waitpid: ", strerror(errno)));
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("pid ", pid_, " still running"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

absl::StatusOr<int> Subprocess::Stop(int signal, absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("not running");
  kill(pid_, signal);
  return Wait(timeout);
}

absl::StatusOr<std::string> WaitForFile(const std::string& path, absl::Duration timeout,
                                        Subprocess* child) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      if (!ss.str().empty()) return ss.str();
    }
    if (child != nullptr) {
      absl::StatusOr<int> exited = child->Wait(absl::ZeroDuration());
      if (exited.ok()) {
        return absl::UnavailableError(
            absl::StrCat("child exited with ", *exited, " before writing ", path));
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat("timed out waiting for ", path));
}

std::string TestTempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string RunfilePath(const std::string& workspace_relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr) return workspace_relative;
  return absl::StrCat(srcdir, "/", workspace != nullptr ? workspace : "rill", "/",
                      workspace_relative);
}

}  // namespace rill::testing
