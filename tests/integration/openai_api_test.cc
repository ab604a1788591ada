// `rill serve --openai_port` as a user runs it: one command starts the
// engine(s), the frontend and the smg gateway and prints the OpenAI URL.
// - The official openai SDK drives it (tests/clients/openai_api_check.py:
//   chat and completions, streaming, logprobs, n=2, stop strings and
//   min_tokens, length, a 400) and the greedy text equals the native gRPC
//   API's; the gateway's control plane (/workers) refuses callers without the
//   key rill serve wrote to <run_dir>/smg-admin.key.
// - tests/clients/openai_structured_check.py: response_format json_schema /
//   json_object and tool_choice required / named give output that validates.
// - With --engines=2, tests/clients/openai_dp_check.py sees in each engine's
//   KV events that prompts sharing a long prefix stay on one engine while
//   unrelated ones spread; after replica 1 is killed, every request is served,
//   and rill serve restarts it (a new pid on the same port) and the gateway
//   routes to it again.
// - With an embedding model (all-MiniLM-L6-v2), tests/clients/
//   openai_embeddings_check.py: /v1/embeddings answers (smg 1.13 gaps printed).
// SIGTERM then stops everything with exit code 0.
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/model_dir.h"
#include "base/port_reservation.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"

namespace rill::tests::integration {
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
    if (absl::StrContains(cmdline, needle)) found = pid;
  }
  if (d != nullptr) closedir(d);
  return found;
}

// One `rill serve --openai_port` run, named `name` (its files in the test's
// temporary directory).
class OpenAiServe {
 public:
  absl::Status Start(const std::string& name, const std::vector<std::string>& flags) {
    absl::StatusOr<std::string> python = util::VenvPython();
    if (!python.ok()) return python.status();
    // rill serve finds the gateway's Python through RILL_VENV (./rill sets it).
    setenv("RILL_VENV", python->substr(0, python->rfind("/bin/python")).c_str(), 1);
    run_dir_ = absl::StrCat(util::TestTempDir(), "/", name, "_run");
    log_ = absl::StrCat(util::TestTempDir(), "/", name, ".log");
    const std::string ready = absl::StrCat(util::TestTempDir(), "/", name, ".ready");
    std::remove(ready.c_str());
    absl::StatusOr<base::PortReservation> port = base::PortReservation::Reserve("127.0.0.1", 0);
    if (!port.ok()) return port.status();
    url_ = absl::StrCat("http://127.0.0.1:", port->port(), "/v1");
    std::vector<std::string> argv = {
        util::RunfilePath("cli/rill"), "serve", "--port=0",
        absl::StrCat("--openai_port=", port->port()), "--run_dir=" + run_dir_,
        "--ready_file=" + ready,
        "--engine_binary=" + util::RunfilePath("engine/service/rill-engine"),
        "--frontend_binary=" + util::RunfilePath("frontend/rill-frontend")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    port->Release();  // For rill serve to bind.
    if (absl::Status s = serve_.Start(argv, log_); !s.ok()) return s;
    absl::StatusOr<std::string> address = util::WaitForFile(ready, absl::Seconds(240), &serve_);
    if (!address.ok()) return address.status();
    native_ = std::string(absl::StripAsciiWhitespace(*address));
    return absl::OkStatus();
  }

  // Runs a client script from tests/clients; its output on failure.
  void ExpectPasses(const std::string& script, const std::vector<std::string>& args) {
    absl::StatusOr<util::CommandResult> run = util::RunPython(script, args);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->exit_code, 0) << run->output << "\n" << log();
    std::printf("%s\n", run->output.c_str());
  }

  // SIGTERM: the gateway, the frontends and the engines stop, exit code 0.
  void ExpectCleanStop() {
    kill(serve_.pid(), SIGTERM);
    absl::StatusOr<int> code = serve_.Wait(absl::Seconds(90));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0) << log();
  }

  std::string engine_address(const std::string& port_file) const {
    return absl::StrCat("127.0.0.1:",
                        absl::StripAsciiWhitespace(ReadAll(run_dir_ + "/" + port_file)));
  }
  std::string log() const { return ReadAll(log_); }
  const std::string& url() const { return url_; }
  const std::string& native() const { return native_; }
  const std::string& run_dir() const { return run_dir_; }

 private:
  util::Subprocess serve_;
  std::string run_dir_, log_, url_, native_;
};

TEST(OpenAiApiTest, OpenAiSdkThroughTheGatewayMatchesTheNativeApi) {
  OpenAiServe serve;
  absl::Status started = serve.Start("openai", {"--threads=2", "--max_model_len=1024"});
  ASSERT_TRUE(started.ok()) << started << "\n" << serve.log();
  EXPECT_NE(serve.log().find("OpenAI-compatible API on " + serve.url()), std::string::npos)
      << serve.log();
  serve.ExpectPasses("tests/clients/openai_api_check.py",
                     {"--base_url", serve.url(), "--native", serve.native(), "--proto_dir",
                      "proto", "--admin_key_file", serve.run_dir() + "/smg-admin.key"});
  // Structured outputs: response_format and tool_choice become the proto's
  // constraint, which the engine enforces.
  serve.ExpectPasses("tests/clients/openai_structured_check.py", {"--base_url", serve.url()});
  serve.ExpectCleanStop();
}

TEST(OpenAiApiTest, TwoEnginesPrefixAffinitySpreadAndFailover) {
  OpenAiServe serve;
  absl::Status started =
      serve.Start("openai_dp", {"--threads=1", "--engines=2", "--kv_cache_mb=128",
                                   "--max_model_len=1024"});
  ASSERT_TRUE(started.ok()) << started << "\n" << serve.log();
  const std::string engines =
      absl::StrCat(serve.engine_address("engine.port"), ",", serve.engine_address("engine-1.port"));
  serve.ExpectPasses("tests/clients/openai_dp_check.py",
                     {"--base_url", serve.url(), "--engines", engines, "--phase", "affinity"});
  const pid_t replica = FindProcess("--port_file=" + serve.run_dir() + "/engine-1.port");
  ASSERT_GT(replica, 0);
  kill(replica, SIGKILL);
  absl::SleepFor(absl::Seconds(2));
  serve.ExpectPasses("tests/clients/openai_dp_check.py",
                     {"--base_url", serve.url(), "--engines", engines, "--phase", "failover"});
  // The supervisor restarts the replica after its backoff (1 s), on its port.
  pid_t restarted = -1;
  for (int i = 0; i < 600 && (restarted <= 0 || restarted == replica); ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    restarted = FindProcess("--port_file=" + serve.run_dir() + "/engine-1.port");
  }
  ASSERT_GT(restarted, 0) << serve.log();
  EXPECT_NE(restarted, replica);
  serve.ExpectPasses("tests/clients/openai_dp_check.py",
                     {"--base_url", serve.url(), "--engines", engines, "--phase", "recovered",
                      "--restarted", serve.engine_address("engine-1.port")});
  EXPECT_NE(serve.log().find("restarted engine replica 1"), std::string::npos) << serve.log();
  serve.ExpectCleanStop();
}

TEST(OpenAiApiTest, EmbeddingsThroughTheGatewayEqualTheNativeEncode) {
  OpenAiServe serve;
  absl::Status started =
      serve.Start("openai_embed", {"--threads=1", "--model=" + base::DefaultEmbedModelPath()});
  ASSERT_TRUE(started.ok()) << started << "\n" << serve.log();
  serve.ExpectPasses("tests/clients/openai_embeddings_check.py",
                     {"--base_url", serve.url(), "--native", serve.native(), "--proto_dir",
                      "proto"});
  serve.ExpectCleanStop();
}

// The same model as a Q8_0 GGUF written as llama.cpp writes BERT
// (tests/reference/bert_gguf.py): the gateway tokenizes with the
// tokenizer.json GetTokenizer writes from the GGUF's WordPiece vocabulary.
TEST(OpenAiApiTest, EmbeddingsOfABertGgufThroughTheGateway) {
  const std::string gguf = std::string(std::getenv("TEST_TMPDIR")) + "/minilm-q8_0.gguf";
  absl::StatusOr<util::CommandResult> made = util::RunPython(
      "tests/reference/bert_gguf.py", {base::DefaultEmbedModelPath(), gguf, "--outtype", "q8_0"});
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->exit_code, 0) << made->output;
  OpenAiServe serve;
  absl::Status started = serve.Start("openai_embed_gguf", {"--threads=1", "--model=" + gguf});
  ASSERT_TRUE(started.ok()) << started << "\n" << serve.log();
  serve.ExpectPasses("tests/clients/openai_embeddings_check.py",
                     {"--base_url", serve.url(), "--native", serve.native(), "--proto_dir",
                      "proto"});
  serve.ExpectCleanStop();
}

}  // namespace
}  // namespace rill::tests::integration
