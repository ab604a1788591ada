#include "tests/util/python_runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <climits>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/model_dir.h"
#include "tests/util/subprocess.h"

namespace rill::tests::util {

// The workspace's .venv, found by resolving a runfile symlink back to the
// source tree (Bazel runs tests outside it), for runs without RILL_VENV.
std::string WorkspaceVenv() {
  char resolved[4096];
  if (realpath(RunfilePath("tests/util/BUILD.bazel").c_str(), resolved) == nullptr) return "";
  std::string path(resolved);
  const std::string suffix = "/tests/util/BUILD.bazel";
  if (path.size() < suffix.size()) return "";
  return path.substr(0, path.size() - suffix.size()) + "/.venv";
}

absl::StatusOr<std::string> VenvPython() {
  const char* env = std::getenv("RILL_VENV");
  std::string venv = env != nullptr && *env != '\0' ? std::string(env) : WorkspaceVenv();
  if (venv.empty()) {
    return absl::FailedPreconditionError(
        "RILL_VENV is not set: run ./rill test (or tools/setup.sh and export RILL_VENV)");
  }
  std::string python = absl::StrCat(venv, "/bin/python");
  if (access(python.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(python, " does not exist: run tools/setup.sh"));
  }
  return python;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

absl::StatusOr<CommandResult> RunPython(const std::string& script,
                                        const std::vector<std::string>& args) {
  absl::StatusOr<std::string> python = VenvPython();
  if (!python.ok()) return python.status();
  std::string command = absl::StrCat(ShellQuote(*python), " ", ShellQuote(RunfilePath(script)));
  for (const std::string& a : args) absl::StrAppend(&command, " ", ShellQuote(a));
  return RunCommand(command);
}

std::string DefaultModelPath() { return base::DefaultModelFilePath(); }

}  // namespace rill::tests::util
