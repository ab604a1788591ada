// `rill serve --engines=2 --openai_port`: two rill-engine processes behind the
// smg gateway's cache-aware routing. tests/clients/openai_dp_check.py sees in
// each engine's KV events that prompts sharing a long prefix stay on one
// engine while unrelated ones spread; after replica 1 is killed, every
// request is still served.
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/port_reservation.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"

namespace rill {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The pid of the process whose command line contains `needle`, or -1.
pid_t FindProcess(const std::string& needle) {
  DIR* d = opendir("/proc");
  pid_t found = -1;
  while (dirent* e = d != nullptr ? readdir(d) : nullptr) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::string cmdline = ReadAll(absl::StrCat("/proc/", pid, "/cmdline"));
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (absl::StrContains(cmdline, needle) && !absl::StrContains(cmdline, "openai_dp_check")) {
      found = pid;
    }
  }
  if (d != nullptr) closedir(d);
  return found;
}

TEST(OpenAiDataParallelTest, PrefixAffinitySpreadAndFailover) {
  absl::StatusOr<std::string> python = testing::VenvPython();
  ASSERT_TRUE(python.ok()) << python.status();
  const std::string venv = python->substr(0, python->rfind("/bin/python"));
  setenv("RILL_VENV", venv.c_str(), 1);
  const std::string run_dir = absl::StrCat(testing::TestTempDir(), "/dp_run");
  const std::string ready = absl::StrCat(testing::TestTempDir(), "/dp.ready");
  const std::string log = absl::StrCat(testing::TestTempDir(), "/dp.log");
  std::remove(ready.c_str());
  absl::StatusOr<base::PortReservation> reserved = base::PortReservation::Reserve("127.0.0.1", 0);
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  const int openai_port = reserved->port();
  reserved->Release();
  testing::Subprocess serve;
  ASSERT_TRUE(serve
                  .Start({testing::RunfilePath("cli/rill"), "serve", "--threads=1", "--port=0",
                          "--engines=2", "--max_model_len=1024", "--kv_cache_mb=128",
                          "--openai_port=" + std::to_string(openai_port), "--run_dir=" + run_dir,
                          "--ready_file=" + ready,
                          "--engine_binary=" + testing::RunfilePath("engine/service/rill-engine"),
                          "--frontend_binary=" + testing::RunfilePath("frontend/rill-frontend")},
                         log)
                  .ok());
  absl::StatusOr<std::string> address = testing::WaitForFile(ready, absl::Seconds(240), &serve);
  ASSERT_TRUE(address.ok()) << address.status() << "\n" << ReadAll(log);
  const std::string url = absl::StrCat("http://127.0.0.1:", openai_port, "/v1");
  const std::string engines =
      absl::StrCat("127.0.0.1:", absl::StripAsciiWhitespace(ReadAll(run_dir + "/engine.port")),
                   ",127.0.0.1:", absl::StripAsciiWhitespace(ReadAll(run_dir + "/engine-1.port")));

  absl::StatusOr<testing::CommandResult> run = testing::RunPython(
      "tests/clients/openai_dp_check.py",
      {"--base_url", url, "--engines", engines, "--phase", "affinity"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 0) << run->output << "\n" << ReadAll(log);
  std::printf("%s\n", run->output.c_str());

  const pid_t replica = FindProcess(run_dir + "/engine-1.port");
  ASSERT_GT(replica, 0);
  kill(replica, SIGKILL);
  absl::SleepFor(absl::Seconds(2));
  run = testing::RunPython("tests/clients/openai_dp_check.py",
                           {"--base_url", url, "--engines", engines, "--phase", "failover"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 0) << run->output << "\n" << ReadAll(log);
  std::printf("%s\n", run->output.c_str());

  kill(serve.pid(), SIGTERM);
  absl::StatusOr<int> code = serve.Wait(absl::Seconds(90));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << ReadAll(log);
}

}  // namespace
}  // namespace rill
