// Whole processes die under a running service (SIGKILL, no clean-up): the
// engine seen from the frontend (in-flight requests end UNAVAILABLE, health
// NOT_SERVING, and after the launcher restarts the engine the frontend
// reconnects by itself), one of two frontends (the engine aborts that
// frontend's requests, the other frontend keeps serving), and a stalled
// engine (SIGSTOP: keepalive drops the connection, requests end UNAVAILABLE).
#include <dirent.h>
#include <signal.h>

#include <fstream>
#include <sstream>
#include <string>
#include <map>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rill/v1/inference.grpc.pb.h"
#include "tests/integration/service_stack.h"

namespace rill::tests::integration {
namespace {

using Stream = grpc::ClientReaderWriter<v1::GenerateRequest, v1::GenerateResponse>;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The process whose command line names `port_file` (the launcher passes
// --port_file=<run_dir>/<child>.port to each child); -1 if none.
int PidByPortFile(const std::string& port_file) {
  int found = -1;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    const std::string cmd = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    if (absl::StrContains(cmd, "--port_file=" + port_file)) found = pid;
  }
  closedir(proc);
  return found;
}

v1::GenerateRequest StartMsg(const std::string& prompt, int max_tokens, const std::string& id) {
  v1::GenerateRequest r;
  *r.mutable_start() = GreedyText(prompt, max_tokens, id);
  return r;
}

// Reads until `stream` has streamed a token (the request runs).
bool WaitRunning(Stream* stream) {
  v1::GenerateResponse r;
  while (stream->Read(&r)) {
    if (r.finished()) return false;
    for (const auto& o : r.outputs()) {
      if (o.token_ids_size() > 0) return true;
    }
  }
  return false;
}

// Waits for the last response of the stream's (single) request.
v1::GenerateResponse LastResponse(Stream* stream) {
  v1::GenerateResponse r, last;
  while (stream->Read(&r)) {
    last = r;
    if (r.finished()) break;
  }
  return last;
}

TEST(ProcessCrashTest, EngineKilledThenRestartedFrontendReconnects) {
  ServiceStack stack;
  StackOptions opts;
  ASSERT_TRUE(stack.Start(opts).ok());
  auto channel = stack.NewChannel();
  auto stub = v1::Inference::NewStub(channel);

  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(300)));
  auto stream = stub->Generate(&ctx);
  ASSERT_TRUE(stream->Write(StartMsg("Tell me a very long story.", 4000, "victim")));
  ASSERT_TRUE(WaitRunning(stream.get()));

  const int engine = PidByPortFile(stack.run_dir() + "/engine.port");
  ASSERT_GT(engine, 0) << "engine process not found";
  ASSERT_EQ(kill(engine, SIGKILL), 0);

  // The in-flight request fails fast with UNAVAILABLE; the stream stays open.
  v1::GenerateResponse last = LastResponse(stream.get());
  EXPECT_TRUE(last.finished());
  EXPECT_EQ(last.status().code(), grpc::StatusCode::UNAVAILABLE) << last.status().message();
  EXPECT_NE(last.status().message().find("engine"), std::string::npos) << last.status().message();
  ASSERT_TRUE(WaitForHealth(channel, false, absl::Seconds(30)).ok());
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());

  // Supervision restarts the engine on the same port; the frontend
  // reconnects without a restart of its own.
  const int frontend = PidByPortFile(stack.run_dir() + "/frontend-0.port");
  const absl::Time deadline = absl::Now() + absl::Seconds(240);
  bool serving = false;
  while (absl::Now() < deadline && !serving) {
    ASSERT_TRUE(stack.launcher()->Supervise().ok());
    absl::StatusOr<bool> s = IsServing(channel);
    serving = s.ok() && *s;
    if (!serving) absl::SleepFor(absl::Milliseconds(250));
  }
  ASSERT_TRUE(serving) << "the frontend did not come back after the engine restart";
  EXPECT_EQ(PidByPortFile(stack.run_dir() + "/frontend-0.port"), frontend);
  auto after = GenerateOnce(stub.get(), GreedyText("The capital of France is", 4));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->status.code(), 0) << after->status.message();
  EXPECT_EQ(after->token_ids.size(), 4u);
}

TEST(ProcessCrashTest, KilledFrontendsRequestsAreAbortedAndTheOtherFrontendServes) {
  ServiceStack stack;
  StackOptions opts;
  opts.frontends = 2;
  opts.restart = false;  // Keep the killed frontend down.
  ASSERT_TRUE(stack.Start(opts).ok());
  std::map<std::string, std::shared_ptr<grpc::Channel>> by_frontend;
  for (int tag = 0; tag < 64 && by_frontend.size() < 2; ++tag) {
    auto channel = stack.NewChannel(tag);
    grpc::ClientContext c;
    v1::Load load;
    ASSERT_TRUE(v1::Inference::NewStub(channel)->GetLoad(&c, {}, &load).ok());
    by_frontend.emplace(load.frontend_id(), channel);
  }
  ASSERT_EQ(by_frontend.size(), 2u);

  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(300)));
  auto stream = v1::Inference::NewStub(by_frontend["0"])->Generate(&ctx);
  ASSERT_TRUE(stream->Write(StartMsg("Tell me a very long story.", 4000, "orphan")));
  ASSERT_TRUE(WaitRunning(stream.get()));

  const int frontend = PidByPortFile(stack.run_dir() + "/frontend-0.port");
  ASSERT_GT(frontend, 0);
  ASSERT_EQ(kill(frontend, SIGKILL), 0);

  // The client sees its call fail (connection lost), not a hang.
  v1::GenerateResponse r;
  while (stream->Read(&r)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);

  // The engine noticed the broken stream and aborted the orphan: the other
  // frontend reports no unfinished requests (GetLoad is the engine's view).
  auto other = v1::Inference::NewStub(by_frontend["1"]);
  int unfinished = -1;
  for (int i = 0; i < 300 && unfinished != 0; ++i) {
    grpc::ClientContext c;
    v1::Load load;
    ASSERT_TRUE(other->GetLoad(&c, {}, &load).ok());
    unfinished = load.num_unfinished_requests();
    if (unfinished != 0) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(unfinished, 0);
  auto c = GenerateOnce(other.get(), GreedyText("The capital of France is", 4));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status.code(), 0) << c->status.message();
  EXPECT_EQ(c->token_ids.size(), 4u);
}

TEST(ProcessCrashTest, StalledEngineIsDroppedByKeepaliveAndRecovers) {
  ServiceStack stack;
  StackOptions opts;
  // Short keepalive so the stall is found in seconds (default 30 s + 10 s).
  opts.frontend_flags = {"--keepalive_time_ms=1000", "--keepalive_timeout_ms=2000"};
  ASSERT_TRUE(stack.Start(opts).ok());
  auto channel = stack.NewChannel();
  auto stub = v1::Inference::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(300)));
  auto stream = stub->Generate(&ctx);
  ASSERT_TRUE(stream->Write(StartMsg("Tell me a very long story.", 4000, "stalled")));
  ASSERT_TRUE(WaitRunning(stream.get()));

  // SIGSTOP: the engine's sockets stay open but nothing answers, as when
  // the network between frontend and engine stalls.
  const int engine = PidByPortFile(stack.run_dir() + "/engine.port");
  ASSERT_GT(engine, 0);
  ASSERT_EQ(kill(engine, SIGSTOP), 0);
  v1::GenerateResponse last = LastResponse(stream.get());
  const bool failed = last.finished() && last.status().code() == grpc::StatusCode::UNAVAILABLE;
  EXPECT_TRUE(failed) << last.DebugString();
  EXPECT_FALSE(IsServing(channel).value_or(true));
  // New requests during the stall are refused, not left hanging.
  auto during = GenerateOnce(stub.get(), GreedyText("Hello", 4), absl::Seconds(60));
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ(during->status.code(), grpc::StatusCode::UNAVAILABLE) << during->status.message();
  ASSERT_EQ(kill(engine, SIGCONT), 0);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());

  // The same engine process answers again: the frontend reconnects.
  ASSERT_TRUE(WaitForHealth(channel, true, absl::Seconds(60)).ok());
  auto after = GenerateOnce(stub.get(), GreedyText("The capital of France is", 4));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->status.code(), 0) << after->status.message();
}

}  // namespace
}  // namespace rill::tests::integration
