#include "tests/util/subprocess.h"


#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace rill::tests::util {

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

}  // namespace rill::tests::util
