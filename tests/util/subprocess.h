// Test helpers around base::ChildProcess: start a binary in its own process group,
// wait for a file it writes when ready, and stop it. For integration tests
// that must cross real process boundaries.
#ifndef RILL_TESTS_UTIL_SUBPROCESS_H_
#define RILL_TESTS_UTIL_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/child_process.h"
#include "absl/time/time.h"

namespace rill::tests::util {

// Kept as the tests' name for base::ChildProcess.
using Subprocess = base::ChildProcess;

// Polls until `path` exists and is non-empty, and returns its contents;
// fails after `timeout` or if `child` exits first.
absl::StatusOr<std::string> WaitForFile(const std::string& path, absl::Duration timeout,
                                        Subprocess* child = nullptr);

// $TEST_TMPDIR (Bazel) or /tmp.
std::string TestTempDir();

// Path of a data dependency given its workspace-relative path
// ("frontend/rill-frontend"), resolved through the Bazel runfiles tree.
std::string RunfilePath(const std::string& workspace_relative);

}  // namespace rill::tests::util

#endif  // RILL_TESTS_UTIL_SUBPROCESS_H_
