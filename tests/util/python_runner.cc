#include "tests/util/python_runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tests/util/subprocess.h"

namespace rill::testing {

absl::StatusOr<std::string> VenvPython() {
  const char* venv = std::getenv("RILL_VENV");
  if (venv == nullptr || *venv == '\0') {
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

std::string DefaultModelPath() {
  const char* dir = std::getenv("RILL_MODEL_DIR");
  std::string base = dir != nullptr && *dir != '\0'
                         ? std::string(dir)
                         : absl::StrCat(std::getenv("HOME") ? std::getenv("HOME") : "",
                                        "/.cache/rill/models");
  return base + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace rill::testing
