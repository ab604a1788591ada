// ServerLauncher with stand-in children (shell scripts that print their pid
// and write a port file): a child that dies is restarted and its log, the
// one that says why it died, is kept, followed by a marker and the new
// child's log (issue 27 item 14).
#include "cli/server_launcher.h"

#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tests/util/subprocess.h"

namespace rill::cli {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Prints a line with its pid, then "listens": its pid stands in for the
// port (the launcher only needs a positive number there).
std::string WriteChildScript(const std::string& dir) {
  const std::string path = dir + "/child.sh";
  std::ofstream(path) << "#!/bin/sh\n"
                         "for a in \"$@\"; do case \"$a\" in --port_file=*) f=\"${a#--port_file=}\";; "
                         "esac; done\n"
                         "echo \"child $$ started\"\n"
                         "echo \"args: $*\"\n"
                         "echo $$ > \"$f.tmp\" && mv \"$f.tmp\" \"$f\"\n"
                         "exec sleep 600\n";
  chmod(path.c_str(), 0755);
  return path;
}

int PidIn(const std::string& port_file) {
  int pid = 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(port_file)), &pid) ? pid : -1;
}

TEST(ServerLauncherTest, RestartedChildKeepsThePreviousLog) {
  const std::string dir = absl::StrCat(tests::util::TestTempDir(), "/launcher");
  mkdir(dir.c_str(), 0755);
  LaunchOptions o;
  o.port = 0;
  o.engine_binary = WriteChildScript(dir);
  o.frontend_binary = o.engine_binary;
  o.run_dir = dir;
  o.log_to_files = true;
  o.start_timeout = absl::Seconds(60);
  ServerLauncher launcher(o);
  ASSERT_TRUE(launcher.Start().ok());
  const std::string log = dir + "/engine.log";
  const int first = PidIn(dir + "/engine.port");
  ASSERT_GT(first, 0);
  const std::string first_line = absl::StrCat("child ", first, " started");
  ASSERT_TRUE(absl::StrContains(ReadFile(log), first_line)) << ReadFile(log);

  ASSERT_EQ(kill(first, SIGKILL), 0);
  int second = first;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while ((second == first || second <= 0) && absl::Now() < deadline) {
    ASSERT_TRUE(launcher.Supervise().ok());
    absl::SleepFor(absl::Milliseconds(50));
    second = PidIn(dir + "/engine.port");
  }
  ASSERT_NE(second, first) << "the engine was not restarted";
  const std::string second_line = absl::StrCat("child ", second, " started");
  std::string text;
  while (!absl::StrContains(text = ReadFile(log), second_line) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  // The first child's output, then a marker saying why, then the second's.
  const size_t a = text.find(first_line);
  const size_t marker = text.find("==== rill serve: restarting engine");
  const size_t b = text.find(second_line);
  ASSERT_NE(a, std::string::npos) << text;
  ASSERT_NE(marker, std::string::npos) << text;
  ASSERT_NE(b, std::string::npos) << text;
  EXPECT_LT(a, marker);
  EXPECT_LT(marker, b);
  EXPECT_TRUE(absl::StrContains(text.substr(marker), "signal 9")) << text;
  // The new engine is told it is the first restart (rill:engine_restarts_total).
  EXPECT_FALSE(absl::StrContains(text.substr(0, marker), "--engine_restarts")) << text;
  EXPECT_TRUE(absl::StrContains(text.substr(marker), "--engine_restarts=1")) << text;
  launcher.Stop(/*immediately=*/true);
}

}  // namespace
}  // namespace rill::cli
