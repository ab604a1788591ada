// The engine's port under `rill serve` (ServerLauncher) with two
// tensor-parallel workers: nothing on it answers without a credential but
// health, no other TCP port of the engine or its workers serves its
// services, the credentials travel in 0600 files (never on a command line),
// and the frontends, which hold them, serve Generate and Admin as before.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/call_auth.h"
#include "base/secret_file.h"
#include "rill/internal/engine.grpc.pb.h"
#include "rill/v1/admin.grpc.pb.h"
#include "rill/v1/inference.grpc.pb.h"
#include "tests/integration/service_stack.h"

namespace rill::tests::integration {
namespace {

constexpr char kToken[] = "engine-port-auth-admin-token";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Processes whose parent is `pid`.
std::vector<int> ChildrenOf(int pid) {
  std::vector<int> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    int p = 0;
    if (!absl::SimpleAtoi(e->d_name, &p)) continue;
    // /proc/<p>/stat: "pid (comm) state ppid ..."; comm may hold spaces.
    const std::string stat = ReadFile(absl::StrCat("/proc/", p, "/stat"));
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ');
    int ppid = 0;
    if (f.size() > 1 && absl::SimpleAtoi(f[1], &ppid) && ppid == pid) out.push_back(p);
  }
  closedir(proc);
  return out;
}

// TCP ports in LISTEN state held by the processes `pids`.
std::set<int> ListeningPorts(const std::vector<int>& pids) {
  std::set<std::string> inodes;
  for (int pid : pids) {
    const std::string dir = absl::StrCat("/proc/", pid, "/fd");
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) continue;
    while (dirent* e = readdir(d)) {
      char buf[256];
      const ssize_t n = readlink(absl::StrCat(dir, "/", e->d_name).c_str(), buf, sizeof(buf) - 1);
      if (n <= 0) continue;
      const std::string link(buf, n);
      if (absl::StartsWith(link, "socket:[")) inodes.insert(link.substr(8, link.size() - 9));
    }
    closedir(d);
  }
  std::set<int> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream lines(ReadFile(table));
    std::string line;
    std::getline(lines, line);  // Header.
    while (std::getline(lines, line)) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      if (f.size() < 10 || f[3] != "0A" || !inodes.count(f[9])) continue;
      int port = 0;
      if (absl::SimpleHexAtoi(f[1].substr(f[1].rfind(':') + 1), &port)) ports.insert(port);
    }
  }
  return ports;
}

std::shared_ptr<grpc::Channel> Channel(const std::string& address, base::CallMetadata md) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return base::CreateChannelWithMetadata(address, grpc::InsecureChannelCredentials(), args,
                                         std::move(md));
}

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

grpc::Status GetTokenizer(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(10));
  internal::TokenizerSpec spec;
  return internal::Engine::NewStub(channel)->GetTokenizer(&ctx, {}, &spec);
}

grpc::Status Sleep(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(10));
  v1::SleepRequest req;
  req.set_level(2);
  v1::SleepResponse resp;
  return v1::Admin::NewStub(channel)->Sleep(&ctx, req, &resp);
}

grpc::Status IsSleeping(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(10));
  v1::IsSleepingResponse resp;
  return v1::Admin::NewStub(channel)->IsSleeping(&ctx, {}, &resp);
}

TEST(EnginePortAuthTest, NothingAnswersWithoutACredentialAndTheFrontendsStillServe) {
  ServiceStack stack;
  StackOptions opts;
  opts.tensor_parallel_size = 2;
  opts.admin_token = kToken;
  ASSERT_TRUE(stack.Start(opts).ok());
  const std::string engine = stack.engine_address();

  // Unauthenticated: the internal API, Admin (Sleep would stop the whole
  // service) and a Generate stream.
  const auto anonymous = Channel(engine, {});
  grpc::Status s = Sleep(anonymous);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_EQ(GetTokenizer(anonymous).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10));
    auto stream = internal::Engine::NewStub(anonymous)->Generate(&ctx);
    internal::EngineRequest req;
    req.mutable_start()->set_request_id("anonymous");
    req.mutable_start()->add_prompt_token_ids(1);
    (void)stream->Write(req);
    internal::EngineOutput out;
    EXPECT_FALSE(stream->Read(&out));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // Admin wants the admin token; the engine secret alone is not it.
  const std::string secret_file = stack.run_dir() + "/engine.secret";
  absl::StatusOr<std::string> secret = base::ReadSecretFile(secret_file);
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(Sleep(Channel(engine, base::EngineCallMetadata(*secret))).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(IsServing(stack.NewChannel()).value_or(false));  // Nothing slept.

  // With the credentials, the same calls work.
  EXPECT_TRUE(GetTokenizer(Channel(engine, base::EngineCallMetadata(*secret))).ok());
  s = IsSleeping(Channel(engine, base::EngineCallMetadata(*secret, kToken)));
  EXPECT_TRUE(s.ok()) << s.error_message();

  // The engine listens on its one port; its workers' ports (gloo pairs)
  // serve none of its services.
  const int engine_pid = stack.ChildPid("engine");
  ASSERT_GT(engine_pid, 0);
  std::vector<int> workers = ChildrenOf(engine_pid);
  EXPECT_EQ(workers.size(), 2u);
  const int engine_port = stack.launcher()->engine_port();
  EXPECT_EQ(ListeningPorts({engine_pid}), std::set<int>{engine_port});
  for (int port : ListeningPorts(workers)) {
    const auto other = Channel(absl::StrCat("127.0.0.1:", port), {});
    EXPECT_FALSE(GetTokenizer(other).ok()) << "worker port " << port;
    EXPECT_FALSE(IsSleeping(other).ok()) << "worker port " << port;
  }

  // The credentials are 0600 files, on no command line.
  for (const std::string file : {"engine.secret", "admin.token"}) {
    struct stat st;
    ASSERT_EQ(stat((stack.run_dir() + "/" + file).c_str(), &st), 0) << file;
    EXPECT_EQ(st.st_mode & 0777, 0600) << file;
  }
  std::vector<int> all = workers;
  all.push_back(engine_pid);
  all.push_back(stack.ChildPid("frontend-0"));
  for (int pid : all) {
    const std::string cmd = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    EXPECT_EQ(cmd.find(*secret), std::string::npos) << "pid " << pid;
    EXPECT_EQ(cmd.find(kToken), std::string::npos) << "pid " << pid;
  }

  // Through the frontend (which holds both): Generate, and Admin with the token.
  auto client = stack.NewChannel();
  absl::StatusOr<Collected> c =
      GenerateOnce(v1::Inference::NewStub(client).get(), GreedyText("The capital of France is", 4));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status.code(), 0) << c->status.message();
  EXPECT_EQ(c->token_ids.size(), 4u);
  grpc::ClientContext admin_ctx;
  admin_ctx.set_deadline(In(30));
  admin_ctx.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
  v1::IsSleepingResponse sleeping;
  s = v1::Admin::NewStub(client)->IsSleeping(&admin_ctx, {}, &sleeping);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(sleeping.sleeping());
}

}  // namespace
}  // namespace rill::tests::integration
