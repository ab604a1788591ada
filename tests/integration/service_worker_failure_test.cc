// A tensor-parallel worker dies (SIGKILL) under a running service: health
// goes NOT_SERVING, new requests get UNAVAILABLE with the reason, nothing
// hangs; the engine exits (--exit_when_dead_s) and the launcher's supervision
// restarts it, after which the service answers again. This is the documented
// recovery path of `rill serve` and of the Kubernetes manifests (where the
// kubelet restarts the engine container).
#include <signal.h>
#include <sys/types.h>

#include <dirent.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "rill/v1/inference.grpc.pb.h"
#include "tests/integration/service_stack.h"

namespace rill::tests::integration {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int ParentPid(int pid) {
  // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces.
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 2));
  std::string state;
  int ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

// rill-worker processes whose parent is the engine of the stack in run_dir
// (the engine's command line names its port file there).
std::vector<int> WorkersOf(const std::string& run_dir) {
  std::vector<int> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    const std::string cmd = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
    if (!absl::StrContains(cmd, "rill-worker")) continue;
    const std::string parent_cmd = ReadFile("/proc/" + std::to_string(ParentPid(pid)) + "/cmdline");
    if (absl::StrContains(parent_cmd, "rill-engine") && absl::StrContains(parent_cmd, run_dir)) {
      out.push_back(pid);
    }
  }
  closedir(proc);
  return out;
}

TEST(ServiceWorkerFailureTest, KilledWorkerGivesUnavailableAndRestartRecovers) {
  ServiceStack stack;
  StackOptions options;
  options.tensor_parallel_size = 2;
  options.engine_flags = {"--exit_when_dead_s=2"};
  ASSERT_TRUE(stack.Start(options).ok());
  auto channel = stack.NewChannel();
  auto stub = v1::Inference::NewStub(channel);
  auto before = GenerateOnce(stub.get(), GreedyText("The capital of France is", 8));
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(before->token_ids.size(), 8u);

  // A request in flight when the worker dies: it ends UNAVAILABLE (retry
  // once the engine is back) with the cause, not INTERNAL "UNAVAILABLE: ...".
  grpc::ClientContext inflight_ctx;
  inflight_ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(300)));
  auto inflight = stub->Generate(&inflight_ctx);
  v1::GenerateRequest long_request;
  *long_request.mutable_start() = GreedyText("Once upon a time", 2000, "inflight");
  ASSERT_TRUE(inflight->Write(long_request));
  v1::GenerateResponse resp;
  ASSERT_TRUE(inflight->Read(&resp));
  ASSERT_FALSE(resp.finished()) << resp.status().message();

  std::vector<int> workers = WorkersOf(stack.run_dir());
  ASSERT_FALSE(workers.empty()) << "no rill-worker children of the engine found";
  ASSERT_EQ(kill(workers.front(), SIGKILL), 0);
  while (!resp.finished() && inflight->Read(&resp)) {
  }
  ASSERT_TRUE(resp.finished());
  EXPECT_EQ(resp.status().code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE))
      << resp.status().message();
  EXPECT_NE(resp.status().message().find("worker rank"), std::string::npos)
      << resp.status().message();
  EXPECT_EQ(resp.status().message().find("UNAVAILABLE:"), std::string::npos)
      << resp.status().message();
  inflight->WritesDone();
  (void)inflight->Finish();

  // Health turns NOT_SERVING, and requests fail fast with UNAVAILABLE (as a
  // call status or a per-request status) naming the cause; no hang.
  ASSERT_TRUE(WaitForHealth(channel, false, absl::Seconds(30)).ok());
  const absl::Time sent = absl::Now();
  auto during = GenerateOnce(stub.get(), GreedyText("Hello", 8), absl::Seconds(60));
  EXPECT_LT(absl::Now() - sent, absl::Seconds(30));
  const int code = during.ok() ? during->status.code() : static_cast<int>(during.status().code());
  const std::string message =
      during.ok() ? during->status.message() : std::string(during.status().message());
  EXPECT_EQ(code, static_cast<int>(grpc::StatusCode::UNAVAILABLE)) << message;
  EXPECT_FALSE(message.empty());

  // Supervision restarts the engine once it has exited; the service recovers.
  const absl::Time deadline = absl::Now() + absl::Seconds(240);
  bool serving = false;
  while (absl::Now() < deadline && !serving) {
    ASSERT_TRUE(stack.launcher()->Supervise().ok());
    absl::StatusOr<bool> s = IsServing(channel);
    serving = s.ok() && *s;
    if (!serving) absl::SleepFor(absl::Milliseconds(250));
  }
  ASSERT_TRUE(serving) << "service did not recover after the engine restart";
  auto after = GenerateOnce(stub.get(), GreedyText("The capital of France is", 8));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->token_ids, before->token_ids);
  EXPECT_EQ(WorkersOf(stack.run_dir()).size(), workers.size());
}

}  // namespace
}  // namespace rill::tests::integration
