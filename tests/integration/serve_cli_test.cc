// `rill serve` as users run it: one command starts engine + frontend, prints
// the address, serves, and on SIGTERM ends in-flight requests with
// finish_reason ABORT and leaves no process behind.
#include <dirent.h>
#include <signal.h>

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
#include "rill/v1/inference.grpc.pb.h"
#include "tests/integration/service_stack.h"
#include "tests/util/subprocess.h"

namespace rill {
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

TEST(ServeCliTest, ServesAndShutsDownCleanlyOnSigterm) {
  const std::string dir = testing::TestTempDir();
  const std::string ready = absl::StrCat(dir, "/serve.ready");
  std::remove(ready.c_str());
  testing::Subprocess serve;
  ASSERT_TRUE(serve
                  .Start({testing::RunfilePath("cli/rill"), "serve", "--port=0", "--threads=2",
                          "--ready_file=" + ready, "--log_to_files", "--run_dir=" + dir,
                          "--engine_binary=" + testing::RunfilePath("engine/service/rill-engine"),
                          "--frontend_binary=" + testing::RunfilePath("frontend/rill-frontend")},
                         absl::StrCat(dir, "/serve.log"))
                  .ok());
  absl::StatusOr<std::string> address = testing::WaitForFile(ready, absl::Seconds(180), &serve);
  ASSERT_TRUE(address.ok()) << address.status();
  const std::string addr(absl::StripAsciiWhitespace(*address));
  const std::set<pid_t> children = Descendants(serve.pid());
  EXPECT_GE(children.size(), 2u) << "engine and frontend";

  auto stub = v1::Inference::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  auto stream = stub->Generate(&ctx);
  v1::GenerateRequest req;
  *req.mutable_start() = testing::GreedyText("Write a long essay about rivers.", 4000, "inflight");
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

}  // namespace
}  // namespace rill
