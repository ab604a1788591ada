#include "base/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace rill::base {
namespace {

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string DescribeExitCode(int code) {
  if (code > 128) return absl::StrCat("signal ", code - 128, " (", strsignal(code - 128), ")");
  return absl::StrCat("exit code ", code);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

absl::Status ChildProcess::Start(const std::vector<std::string>& argv,
                                 const ChildOptions& options) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  if (pid_ > 0) return absl::FailedPreconditionError("child already running");
  if (access(argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(argv[0], " is not an executable: ", strerror(errno)));
  }
  std::vector<char*> c_argv;
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    setpgid(0, 0);
    if (options.kill_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(126);  // The parent died before prctl.
    }
    // Signals the parent blocks for sigwait must not stay blocked in the child.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!options.log_path.empty()) {
      int fd = open(options.log_path.c_str(),
                    O_WRONLY | O_CREAT | (options.append_log ? O_APPEND : O_TRUNC), 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
    }
    execv(c_argv[0], c_argv.data());
    _exit(127);
  }
  setpgid(pid, pid);  // Also from the parent, so SignalGroup works at once.
  pid_ = pid;
  exit_code_ = -1;
  return absl::OkStatus();
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("not running");
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      exit_code_ = DecodeWaitStatus(status);
      return exit_code_;
    }
    if (r < 0) return absl::InternalError(absl::StrCat("waitpid: ", strerror(errno)));
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("pid ", pid_, " still running"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

absl::StatusOr<int> ChildProcess::Stop(int signal, absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("not running");
  kill(pid_, signal);
  return Wait(timeout);
}

void ChildProcess::SignalGroup(int signal) {
  if (pid_ > 0) kill(-pid_, signal);
}

}  // namespace rill::base
