// `rill serve` as users run it: one command starts engine + frontend, prints
// what it serves and where, and on SIGTERM drains (running requests finish,
// those past the grace end with finish_reason ABORT) and leaves no process
// and no temporary directory behind. A bad model or a busy port fails at
// once with exit code 2 and the reason; Ctrl-C works during start-up.
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "engine/model_path.h"
#include "rill/v1/inference.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/integration/service_stack.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"

namespace rill::tests::integration {
namespace {

// Every live process whose parent chain reaches `root`.
std::set<pid_t> Descendants(pid_t root) {
  std::map<pid_t, pid_t> parent;
  DIR* d = opendir("/proc");
  if (d == nullptr) return {};
  while (dirent* e = readdir(d)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ');
    pid_t ppid = 0;
    if (f.size() > 1 && f[0] != "Z" && absl::SimpleAtoi(f[1], &ppid)) parent[pid] = ppid;
  }
  closedir(d);
  std::set<pid_t> out;
  for (const auto& [pid, ppid] : parent) {
    for (pid_t p = ppid; p > 1; p = parent.count(p) ? parent[p] : 0) {
      if (p == root) {
        out.insert(pid);
        break;
      }
    }
  }
  return out;
}

// Entries of `dir` (not . and ..).
std::vector<std::string> List(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  closedir(d);
  return out;
}

// A fresh empty directory for one test; `rill serve` makes its run dir in
// $TMPDIR, so a test sees exactly what it leaves behind.
std::string FreshDir(const std::string& name) {
  const std::string dir = absl::StrCat(util::TestTempDir(), "/", name);
  util::RunCommand("rm -rf '" + dir + "' && mkdir -p '" + dir + "'");
  return dir;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::vector<std::string> ServeArgv(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {
      util::RunfilePath("cli/rill"), "serve", "--threads=2",
      "--engine_binary=" + util::RunfilePath("engine/service/rill-engine"),
      "--frontend_binary=" + util::RunfilePath("frontend/rill-frontend")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

// `rill serve` with `flags`, to completion, through the shell.
util::CommandResult RunServe(const std::string& tmpdir, const std::vector<std::string>& flags) {
  std::string command = "TMPDIR='" + tmpdir + "'";
  for (const std::string& a : ServeArgv(flags)) command += " '" + a + "'";
  return util::RunCommand(command + " 2>&1");
}

bool Serving(const std::string& address) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  return stub->Check(&ctx, req, &resp).ok() &&
         resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

// Each of these used to keep `rill serve` waiting for 120 s, printing the
// engine's reason ~600 times, and then blame the frontend.
TEST(ServeCliTest, BadModelsExitTwoWithinSecondsWithTheEnginesReason) {
  const std::string dir = FreshDir("bad_models");
  const std::string garbage = dir + "/garbage.gguf";
  const std::string bad_version = dir + "/bad_version.gguf";
  const std::string no_config = dir + "/no_config";
  util::RunCommand("head -c 1024 /dev/urandom > '" + garbage + "'");
  // The GGUF magic, then version 99.
  util::RunCommand("printf 'GGUF\\143\\000\\000\\000' > '" + bad_version +
                   "' && head -c 256 /dev/zero >> '" + bad_version + "'");
  util::RunCommand("mkdir -p '" + no_config + "'");
  struct Case {
    std::string model;
    std::string reason;
  };
  std::vector<Case> cases = {
      {dir + "/nonexistent.gguf", "no such file or directory"},
      {garbage, "not a GGUF file"},
      {bad_version, "unsupported GGUF version 99"},
      {no_config, "config.json"},
  };
  // An encoder directory without tokenizer.json: the frontends could never
  // start (they need the tokenizer).
  const std::string minilm = engine::ResolveModelPath("default");
  const std::string encoder =
      minilm.substr(0, minilm.rfind('/')) + "/all-MiniLM-L6-v2";
  if (util::RunCommand("test -f '" + encoder + "/config.json'").exit_code == 0) {
    const std::string no_tokenizer = dir + "/no_tokenizer";
    util::RunCommand("mkdir -p '" + no_tokenizer + "' && for f in '" + encoder +
                     "'/*; do [ \"$(basename \"$f\")\" = tokenizer.json ] || ln -s \"$f\" '" +
                     no_tokenizer + "'/; done");
    cases.push_back({no_tokenizer, "tokenizer.json"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    const std::string tmpdir = FreshDir("bad_models_tmp");
    const absl::Time start = absl::Now();
    util::CommandResult r = RunServe(tmpdir, {"--port=0", "--model=" + c.model});
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_LT(took, absl::Seconds(30)) << r.output;  // ~1 s unloaded; was 120 s.
    EXPECT_EQ(Count(r.output, "rill serve: engine cannot start: the model failed to load: "), 1)
        << r.output;
    EXPECT_NE(r.output.find(c.reason), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("did not listen"), std::string::npos) << r.output;
    EXPECT_LE(Count(r.output, "waiting for the engine"), 1) << r.output;
    EXPECT_TRUE(List(tmpdir).empty()) << "left behind in " << tmpdir;
  }
}

// Signals used to be blocked until start-up ended (up to 120 s).
TEST(ServeCliTest, CtrlCDuringStartupStopsAtOnceAndLeavesNothing) {
  const std::string tmpdir = FreshDir("ctrl_c_tmp");
  setenv("TMPDIR", tmpdir.c_str(), 1);
  util::Subprocess serve;
  ASSERT_TRUE(serve
                  .Start(ServeArgv({"--port=0", "--engine_flags=--debug_load_delay_s=300"}),
                         absl::StrCat(util::TestTempDir(), "/ctrl_c.log"))
                  .ok());
  unsetenv("TMPDIR");
  // The engine listens and "loads" for 300 s; the frontend waits for it.
  absl::Status listening = absl::DeadlineExceededError("engine.port never appeared");
  for (absl::Time deadline = absl::Now() + absl::Seconds(60); absl::Now() < deadline;) {
    const std::vector<std::string> runs = List(tmpdir);
    if (runs.size() == 1 && !ReadAll(tmpdir + "/" + runs[0] + "/engine.port").empty()) {
      listening = absl::OkStatus();
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(listening.ok()) << listening;
  const std::set<pid_t> children = Descendants(serve.pid());
  EXPECT_GE(children.size(), 1u);
  const absl::Time start = absl::Now();
  kill(serve.pid(), SIGINT);
  absl::StatusOr<int> code = serve.Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(*code, 128 + SIGINT);
  for (pid_t pid : children) {
    EXPECT_NE(kill(pid, 0), 0) << "process " << pid << " outlived rill serve";
  }
  EXPECT_TRUE(List(tmpdir).empty()) << "left behind in " << tmpdir;
}

// Serves, says what and where once, refuses a second server on its port,
// and on SIGTERM lets a running generation finish (rolling upgrades).
TEST(ServeCliTest, BusyPortFailsAndSigtermDrainsRunningRequests) {
  const std::string tmpdir = FreshDir("drain_tmp");
  const std::string ready = absl::StrCat(util::TestTempDir(), "/drain.ready");
  const std::string log = absl::StrCat(util::TestTempDir(), "/drain.log");
  std::remove(ready.c_str());
  setenv("TMPDIR", tmpdir.c_str(), 1);
  util::Subprocess serve;
  // A long grace, so only a broken drain can end the request early.
  ASSERT_TRUE(
      serve.Start(ServeArgv({"--port=0", "--ready_file=" + ready, "--shutdown_grace_ms=120000"}),
                  log)
          .ok());
  unsetenv("TMPDIR");
  absl::StatusOr<std::string> address = util::WaitForFile(ready, absl::Seconds(180), &serve);
  ASSERT_TRUE(address.ok()) << address.status();
  const std::string addr(absl::StripAsciiWhitespace(*address));
  const std::string port = addr.substr(addr.rfind(':') + 1);

  // What it serves, once: the resolved model path, backend, KV cache, address.
  const std::string started = ReadAll(log);
  EXPECT_EQ(Count(started, "Rill is serving "), 1) << started;
  EXPECT_NE(started.find("Rill is serving " + engine::ResolveModelPath("default") + " (backend "),
            std::string::npos)
      << started;
  EXPECT_NE(started.find(", KV cache "), std::string::npos) << started;
  EXPECT_NE(started.find(" on " + addr), std::string::npos) << started;
  EXPECT_EQ(started.find("driver version is insufficient"), std::string::npos) << started;

  // A second server on the same port: exit 2 at once, the first untouched.
  const std::string tmpdir2 = FreshDir("drain_second_tmp");
  util::CommandResult second = RunServe(tmpdir2, {"--port=" + port});
  EXPECT_EQ(second.exit_code, 2) << second.output;
  EXPECT_NE(second.output.find("port " + port + " on 127.0.0.1 is already in use"),
            std::string::npos)
      << second.output;
  EXPECT_EQ(second.output.find("Rill is serving"), std::string::npos) << second.output;
  EXPECT_TRUE(List(tmpdir2).empty());
  EXPECT_TRUE(Serving(addr));

  const std::set<pid_t> children = Descendants(serve.pid());
  auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  auto stub = v1::Inference::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(170)));
  auto stream = stub->Generate(&ctx);
  v1::GenerateRequest req;
  constexpr int kTokens = 200;
  *req.mutable_start() = GreedyText("Write a long essay about rivers.", kTokens, "drain");
  ASSERT_TRUE(stream->Write(req));
  // Running: its first tokens have arrived.
  v1::GenerateResponse resp;
  int tokens = 0;
  while (tokens == 0 && stream->Read(&resp)) {
    ASSERT_EQ(resp.status().code(), 0) << resp.status().message();
    for (const v1::Completion& o : resp.outputs()) tokens += o.token_ids_size();
  }
  ASSERT_GT(tokens, 0);

  const absl::Time sigterm_at = absl::Now();
  kill(serve.pid(), SIGTERM);
  // Health turns NOT_SERVING (or the server stops answering) at once.
  bool not_serving = false;
  for (absl::Time deadline = absl::Now() + absl::Seconds(30); absl::Now() < deadline;) {
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext hctx;
    hctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    grpc::health::v1::HealthCheckRequest hreq;
    grpc::health::v1::HealthCheckResponse hresp;
    if (!health->Check(&hctx, hreq, &hresp).ok() ||
        hresp.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
      not_serving = true;
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(not_serving);

  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  while (stream->Read(&resp)) {
    for (const v1::Completion& o : resp.outputs()) {
      tokens += o.token_ids_size();
      if (o.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) reason = o.finish_reason();
    }
  }
  (void)stream->Finish();
  EXPECT_EQ(reason, v1::FINISH_REASON_LENGTH) << "the drain must let it finish";
  EXPECT_EQ(tokens, kTokens);

  absl::StatusOr<int> code = serve.Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  // Once nothing runs, the drain ends: it does not wait out the grace for
  // a client that keeps its (idle) stream open.
  EXPECT_LT(absl::Now() - sigterm_at, absl::Seconds(90));
  for (pid_t pid : children) {
    EXPECT_NE(kill(pid, 0), 0) << "process " << pid << " outlived rill serve";
  }
  EXPECT_TRUE(List(tmpdir).empty()) << "left behind in " << tmpdir;
}

// Past the grace (1 s here), what still runs ends with finish_reason ABORT.
TEST(ServeCliTest, ServesAndShutsDownCleanlyOnSigterm) {
  const std::string dir = util::TestTempDir();
  const std::string ready = absl::StrCat(dir, "/serve.ready");
  std::remove(ready.c_str());
  util::Subprocess serve;
  ASSERT_TRUE(serve
                  .Start({util::RunfilePath("cli/rill"), "serve", "--port=0", "--threads=2",
                          "--ready_file=" + ready, "--log_to_files", "--run_dir=" + dir,
                          "--shutdown_grace_ms=1000",
                          "--engine_binary=" + util::RunfilePath("engine/service/rill-engine"),
                          "--frontend_binary=" + util::RunfilePath("frontend/rill-frontend")},
                         absl::StrCat(dir, "/serve.log"))
                  .ok());
  absl::StatusOr<std::string> address = util::WaitForFile(ready, absl::Seconds(180), &serve);
  ASSERT_TRUE(address.ok()) << address.status();
  const std::string addr(absl::StripAsciiWhitespace(*address));
  const std::set<pid_t> children = Descendants(serve.pid());
  EXPECT_GE(children.size(), 2u) << "engine and frontend";

  auto stub = v1::Inference::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  auto stream = stub->Generate(&ctx);
  v1::GenerateRequest req;
  *req.mutable_start() = GreedyText("Write a long essay about rivers.", 4000, "inflight");
  ASSERT_TRUE(stream->Write(req));
  v1::GenerateResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_EQ(resp.status().code(), 0) << resp.status().message();

  kill(serve.pid(), SIGTERM);
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  while (stream->Read(&resp)) {
    for (const v1::Completion& o : resp.outputs()) {
      if (o.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) reason = o.finish_reason();
    }
  }
  (void)stream->Finish();
  EXPECT_EQ(reason, v1::FINISH_REASON_ABORT);

  absl::StatusOr<int> code = serve.Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  for (pid_t pid : children) {
    EXPECT_NE(kill(pid, 0), 0) << "process " << pid << " outlived rill serve";
  }
}

// Engine and frontend options are flags of `rill serve` itself (each
// declared once, shared with rill-engine or rill-frontend): what the user
// sets reaches the engine or every frontend, which report it.
// --frontend_flags still passes other frontend flags through.
TEST(ServeCliTest, EngineAndFrontendOptionsAreFlagsOfServe) {
  const std::string dir = FreshDir("engine_options");
  const std::string ready = dir + "/serve.ready";
  util::Subprocess serve;
  ASSERT_TRUE(serve
                  .Start(ServeArgv({"--port=0", "--ready_file=" + ready, "--kv_cache_mb=256",
                                    "--max_num_seqs=8", "--max_n=3", "--max_logprobs=5",
                                    "--frontend_flags=--max_stop_strings=7"}),
                         dir + "/serve.log")
                  .ok());
  absl::StatusOr<std::string> address = util::WaitForFile(ready, absl::Seconds(180), &serve);
  ASSERT_TRUE(address.ok()) << address.status() << "\n" << ReadAll(dir + "/serve.log");
  auto stub = v1::Inference::NewStub(grpc::CreateChannel(
      std::string(absl::StripAsciiWhitespace(*address)), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  v1::ServerConfig config;
  const grpc::Status s = stub->GetServerConfig(&ctx, {}, &config);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(config.engine_options().count("kv_cache_mb"), 1u) << config.DebugString();
  EXPECT_EQ(config.engine_options().at("kv_cache_mb"), "256");
  // Whole blocks of the 256 MiB (a block of the default model is < 1 MiB).
  EXPECT_LE(config.cache().kv_cache_bytes(), int64_t{256} << 20);
  EXPECT_GT(config.cache().kv_cache_bytes(), int64_t{255} << 20);
  EXPECT_EQ(config.scheduler().max_num_seqs(), 8);
  // The frontend's request limits, as it enforces them.
  EXPECT_EQ(config.decoding().max_n(), 3);
  EXPECT_EQ(config.decoding().max_logprobs(), 5);
  EXPECT_EQ(config.decoding().max_stop_strings(), 7);

  kill(serve.pid(), SIGTERM);
  absl::StatusOr<int> code = serve.Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

// A bad engine option fails `rill serve` at start-up with exit code 2 and
// the flag's name.
TEST(ServeCliTest, BadEngineOptionExitsTwoNamingTheFlag) {
  const std::string tmpdir = FreshDir("bad_option");
  util::CommandResult r = RunServe(tmpdir, {"--port=0", "--max_num_seqs=0"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--max_num_seqs must be at least 1"), std::string::npos) << r.output;
}

// So does a bad frontend option, before any child starts.
TEST(ServeCliTest, BadFrontendOptionExitsTwoNamingTheFlag) {
  const std::string tmpdir = FreshDir("bad_frontend_option");
  util::CommandResult r = RunServe(tmpdir, {"--port=0", "--max_n=0"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--max_n must be at least 1"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("starting with"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace rill::tests::integration
