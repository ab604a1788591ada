#include "base/child_process.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace rill::base {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(ChildProcessTest, ReportsExitCodeAndCapturesOutput) {
  ChildProcess child;
  const std::string log = TempPath("echo.log");
  ASSERT_TRUE(child.Start({"/bin/sh", "-c", "echo hello; exit 3"}, log).ok());
  absl::StatusOr<int> code = child.Wait(absl::Seconds(10));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 3);
  EXPECT_EQ(child.exit_code(), 3);
  EXPECT_FALSE(child.running());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "hello\n");
}

TEST(ChildProcessTest, StopBySignalAndDescribe) {
  ChildProcess child;
  ASSERT_TRUE(child.Start({"/bin/sleep", "30"}).ok());
  EXPECT_FALSE(child.Wait(absl::ZeroDuration()).ok());  // Still running.
  absl::StatusOr<int> code = child.Stop(SIGKILL, absl::Seconds(10));
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 128 + SIGKILL);
  EXPECT_EQ(DescribeExitCode(*code).rfind("signal 9", 0), 0u) << DescribeExitCode(*code);
  EXPECT_EQ(DescribeExitCode(2), "exit code 2");
}

TEST(ChildProcessTest, MissingBinaryIsAClearError) {
  ChildProcess child;
  absl::Status s = child.Start({"/nonexistent/rill-worker"});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/rill-worker"), std::string::npos);
}

TEST(ChildProcessTest, SignalGroupReachesGrandchildren) {
  ChildProcess child;
  const std::string pid_file = TempPath("grandchild.pid");
  unlink(pid_file.c_str());
  ASSERT_TRUE(child.Start({"/bin/sh", "-c", "sleep 30 & echo $! > " + pid_file + "; wait"}).ok());
  pid_t grandchild = 0;
  for (int i = 0; i < 500 && grandchild == 0; ++i) {
    std::ifstream in(pid_file);
    in >> grandchild;
    if (grandchild == 0) absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GT(grandchild, 0);
  child.SignalGroup(SIGTERM);
  ASSERT_TRUE(child.Wait(absl::Seconds(10)).ok());
  // The grandchild got the signal too (it is reaped by init, so poll).
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    gone = kill(grandchild, 0) != 0;
    if (!gone) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(gone);
}

}  // namespace
}  // namespace rill::base
