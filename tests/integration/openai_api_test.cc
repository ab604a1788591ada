// `rill serve --openai_port` as a user runs it: one command starts the engine,
// the frontend and the smg gateway and prints the OpenAI URL; the official
// openai SDK then drives it (tests/clients/openai_api_check.py: chat and
// completions, streaming, logprobs, n=2, stop strings, length, a 400) and
// the greedy text equals the native gRPC API's. SIGTERM stops everything.
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/port_reservation.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"

namespace rill {
namespace {

int FreePort() {
  absl::StatusOr<base::PortReservation> port = base::PortReservation::Reserve("127.0.0.1", 0);
  return port.ok() ? port->port() : 0;  // Released here, for rill serve to bind.
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(OpenAiApiTest, OpenAiSdkThroughTheGatewayMatchesTheNativeApi) {
  absl::StatusOr<std::string> python = testing::VenvPython();
  ASSERT_TRUE(python.ok()) << python.status();
  // rill serve finds the gateway's Python through RILL_VENV (./rill sets it).
  const std::string venv = python->substr(0, python->rfind("/bin/python"));
  setenv("RILL_VENV", venv.c_str(), 1);
  const std::string ready = absl::StrCat(testing::TestTempDir(), "/openai.ready");
  const std::string log = absl::StrCat(testing::TestTempDir(), "/openai.log");
  std::remove(ready.c_str());
  const int openai_port = FreePort();
  testing::Subprocess serve;
  ASSERT_TRUE(serve
                  .Start({testing::RunfilePath("cli/rill"), "serve", "--threads=2", "--port=0",
                          "--max_model_len=1024", "--openai_port=" + std::to_string(openai_port),
                          "--ready_file=" + ready,
                          "--engine_binary=" + testing::RunfilePath("engine/service/rill-engine"),
                          "--frontend_binary=" + testing::RunfilePath("frontend/rill-frontend")},
                         log)
                  .ok());
  absl::StatusOr<std::string> address = testing::WaitForFile(ready, absl::Seconds(240), &serve);
  ASSERT_TRUE(address.ok()) << address.status() << "\n" << ReadAll(log);
  const std::string url = absl::StrCat("http://127.0.0.1:", openai_port, "/v1");
  EXPECT_NE(ReadAll(log).find("OpenAI-compatible API on " + url), std::string::npos)
      << ReadAll(log);

  absl::StatusOr<testing::CommandResult> run = testing::RunPython(
      "tests/clients/openai_api_check.py",
      {"--base_url", url, "--native", std::string(absl::StripAsciiWhitespace(*address)),
       "--proto_dir", "proto"});
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
