// Test helper: run the project venv's Python ($RILL_VENV/bin/python) on a
// script from the runfiles, capturing its output.
#ifndef RILL_TESTS_UTIL_PYTHON_RUNNER_H_
#define RILL_TESTS_UTIL_PYTHON_RUNNER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::tests::util {

// $RILL_VENV/bin/python, or an error saying how to set it up.
absl::StatusOr<std::string> VenvPython();

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `command` through /bin/sh, capturing both streams.
CommandResult RunCommand(const std::string& command);

// Runs the workspace-relative `script` with `args` under the venv Python.
absl::StatusOr<CommandResult> RunPython(const std::string& script,
                                        const std::vector<std::string>& args);

// Quotes `s` for /bin/sh.
std::string ShellQuote(const std::string& s);

// The default model's path (base::DefaultModelFilePath()); it may not exist.
std::string DefaultModelPath();

}  // namespace rill::tests::util

#endif  // RILL_TESTS_UTIL_PYTHON_RUNNER_H_
