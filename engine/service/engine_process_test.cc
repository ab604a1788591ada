// The rill-engine binary as a separate process: health while loading, the
// waiting-queue limit, SIGTERM mid-request (finish_reason abort, exit 0),
// and the credentials its port requires (engine secret, admin token).
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/call_auth.h"
#include "base/secret_file.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rill/internal/engine.grpc.pb.h"
#include "rill/v1/admin.grpc.pb.h"
#include "tests/util/subprocess.h"

namespace rill::engine::service {
namespace {

using rill::internal::EngineOutput;
using rill::internal::EngineRequest;
using Stream = grpc::ClientReaderWriter<EngineRequest, EngineOutput>;

constexpr char kSecret[] = "engine-process-test-secret";
constexpr char kAdminToken[] = "engine-process-test-admin";

class EngineProcessTest : public ::testing::Test {
 protected:
  // Starts rill-engine with the engine secret in a file (and `extra` flags);
  // engine_ and admin_ send both credentials, health_ none.
  void StartEngine(std::vector<std::string> extra) {
    const std::string dir = tests::util::TestTempDir();
    // Unique per test: a stale file from an earlier test would name a dead port.
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    const std::string port_file = absl::StrCat(dir, "/engine_port_", name);
    std::remove(port_file.c_str());
    const std::string secret_file = absl::StrCat(dir, "/engine_secret_", name);
    ASSERT_TRUE(base::WriteSecretFile(secret_file, kSecret).ok());
    std::vector<std::string> argv = {tests::util::RunfilePath("engine/service/rill-engine"),
                                     "--host=127.0.0.1",
                                     "--port=0",
                                     "--port_file=" + port_file,
                                     "--model=default",
                                     "--threads=2",
                                     "--max_model_len=512",
                                     "--engine_secret_file=" + secret_file};
    for (std::string& f : extra) argv.push_back(std::move(f));
    ASSERT_TRUE(child_.Start(argv, absl::StrCat(dir, "/engine_", name, ".log")).ok());
    absl::StatusOr<std::string> port =
        tests::util::WaitForFile(port_file, absl::Seconds(60), &child_);
    ASSERT_TRUE(port.ok()) << port.status();
    int p = 0;
    ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(*port), &p));
    address_ = absl::StrCat("127.0.0.1:", p);
    auto channel = Channel(base::EngineCallMetadata(kSecret, kAdminToken));
    engine_ = rill::internal::Engine::NewStub(channel);
    admin_ = rill::v1::Admin::NewStub(channel);
    health_ = grpc::health::v1::Health::NewStub(Channel({}));
  }

  // A channel of its own to the engine whose calls carry `metadata`.
  std::shared_ptr<grpc::Channel> Channel(base::CallMetadata metadata) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return base::CreateChannelWithMetadata(address_, grpc::InsecureChannelCredentials(), args,
                                           std::move(metadata));
  }

  grpc::health::v1::HealthCheckResponse::ServingStatus Health() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    if (!health_->Check(&ctx, req, &resp).ok()) return grpc::health::v1::HealthCheckResponse::UNKNOWN;
    return resp.status();
  }

  void WaitServing() {
    for (int i = 0; i < 1200 && Health() != grpc::health::v1::HealthCheckResponse::SERVING; ++i) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    ASSERT_EQ(Health(), grpc::health::v1::HealthCheckResponse::SERVING);
  }

  static EngineRequest Start(const std::string& id, int max_tokens) {
    EngineRequest r;
    r.mutable_start()->set_request_id(id);
    for (int32_t t : {1, 504, 3458, 282, 4649}) r.mutable_start()->add_prompt_token_ids(t);
    r.mutable_start()->mutable_sampling()->set_temperature(0);
    r.mutable_start()->mutable_sampling()->set_max_tokens(max_tokens);
    r.mutable_start()->mutable_sampling()->set_ignore_eos(true);
    return r;
  }

  tests::util::Subprocess child_;
  std::string address_;
  std::unique_ptr<rill::internal::Engine::Stub> engine_;
  std::unique_ptr<rill::v1::Admin::Stub> admin_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

grpc::StatusCode GetTokenizerCode(rill::internal::Engine::Stub* stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  rill::internal::TokenizerSpec spec;
  return stub->GetTokenizer(&ctx, {}, &spec).error_code();
}

grpc::Status CallSleep(rill::v1::Admin::Stub* stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  rill::v1::SleepRequest req;
  req.set_level(2);
  rill::v1::SleepResponse resp;
  return stub->Sleep(&ctx, req, &resp);
}

grpc::StatusCode IsSleepingCode(rill::v1::Admin::Stub* stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  rill::v1::IsSleepingResponse resp;
  return stub->IsSleeping(&ctx, {}, &resp).error_code();
}

TEST_F(EngineProcessTest, EveryServiceButHealthNeedsItsCredential) {
  StartEngine({"--admin_token=" + std::string(kAdminToken)});
  WaitServing();  // Health answers without credentials (probes).
  auto engine_with = [&](base::CallMetadata md) {
    return rill::internal::Engine::NewStub(Channel(std::move(md)));
  };
  auto admin_with = [&](base::CallMetadata md) {
    return rill::v1::Admin::NewStub(Channel(std::move(md)));
  };
  // The internal API: the engine secret, exactly.
  EXPECT_EQ(GetTokenizerCode(engine_with({}).get()), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetTokenizerCode(engine_with(base::EngineCallMetadata("wrong")).get()),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetTokenizerCode(engine_with(base::EngineCallMetadata(std::string(kSecret) + "x")).get()),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GetTokenizerCode(engine_with({{"authorization", "Bearer " + std::string(kAdminToken)}}).get()),
            grpc::StatusCode::UNAUTHENTICATED);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto stub = engine_with({});
    auto stream = stub->Generate(&ctx);
    (void)stream->Write(Start("sneaky", 4));
    EngineOutput out;
    EXPECT_FALSE(stream->Read(&out));
    grpc::Status s = stream->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_LT(s.error_message().size(), 100u) << s.error_message();
  }
  EXPECT_EQ(GetTokenizerCode(engine_.get()), grpc::StatusCode::OK);

  // Admin: the admin token (the engine secret alone is not enough).
  grpc::Status sleep = CallSleep(admin_with({}).get());
  EXPECT_EQ(sleep.error_code(), grpc::StatusCode::UNAUTHENTICATED) << sleep.error_message();
  EXPECT_EQ(CallSleep(admin_with(base::EngineCallMetadata(kSecret)).get()).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallSleep(admin_with(base::EngineCallMetadata(kSecret, "not-the-token")).get())
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Health(), grpc::health::v1::HealthCheckResponse::SERVING);  // Nothing slept.
  EXPECT_EQ(IsSleepingCode(admin_.get()), grpc::StatusCode::OK);

  // Reflection would list services a caller cannot use: not served.
  grpc::GenericStub generic(Channel({}));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = generic.PrepareCall(
      &ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  call->WritesDone(reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  grpc::Status finish;
  call->Finish(&finish, reinterpret_cast<void*>(3));
  while (cq.Next(&tag, &ok) && tag != reinterpret_cast<void*>(3)) {
  }
  EXPECT_EQ(finish.error_code(), grpc::StatusCode::UNIMPLEMENTED) << finish.error_message();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

TEST_F(EngineProcessTest, AdminIsNotServedWithoutAToken) {
  StartEngine({});
  WaitServing();
  EXPECT_EQ(IsSleepingCode(admin_.get()), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(CallSleep(admin_.get()).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(GetTokenizerCode(engine_.get()), grpc::StatusCode::OK);
}

TEST(EngineProcessStartTest, RefusesToStartWithoutACredential) {
  const std::string log = absl::StrCat(tests::util::TestTempDir(), "/engine_no_secret.log");
  tests::util::Subprocess child;
  ASSERT_TRUE(child
                  .Start({tests::util::RunfilePath("engine/service/rill-engine"),
                          "--host=127.0.0.1", "--port=0"},
                         log)
                  .ok());
  absl::StatusOr<int> code = child.Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 2);
  std::string text;
  if (FILE* f = std::fopen(log.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  EXPECT_NE(text.find("--engine_secret_file"), std::string::npos) << text;
}

TEST_F(EngineProcessTest, NotServingWhileLoadingThenSigtermAbortsAndExitsZero) {
  StartEngine({"--debug_load_delay_s=3"});
  // The server answers before the model is loaded.
  EXPECT_EQ(Health(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  {
    grpc::ClientContext ctx;
    std::unique_ptr<Stream> stream = engine_->Generate(&ctx);
    ASSERT_TRUE(stream->Write(Start("early", 4)));
    EngineOutput out;
    ASSERT_TRUE(stream->Read(&out));
    EXPECT_EQ(out.status().code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE));
    EXPECT_NE(out.status().message().find("loading"), std::string::npos) << out.status().message();
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  WaitServing();

  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream = engine_->Generate(&ctx);
  ASSERT_TRUE(stream->Write(Start("long", 400)));
  EngineOutput out;
  ASSERT_TRUE(stream->Read(&out));  // It is running.
  child_.SignalGroup(SIGTERM);
  rill::v1::FinishReason finish = rill::v1::FINISH_REASON_UNSPECIFIED;
  int tokens = 0;
  do {
    for (const auto& c : out.outputs()) {
      tokens += c.token_ids_size();
      if (c.finish_reason() != rill::v1::FINISH_REASON_UNSPECIFIED) finish = c.finish_reason();
    }
  } while (!out.finished() && stream->Read(&out));
  EXPECT_TRUE(out.finished());
  EXPECT_EQ(finish, rill::v1::FINISH_REASON_ABORT);
  EXPECT_LT(tokens, 400);
  (void)stream->Finish();
  absl::StatusOr<int> code = child_.Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

TEST_F(EngineProcessTest, QueueLimitGivesResourceExhausted) {
  StartEngine({"--max_num_seqs=1", "--max_waiting_requests=1"});
  WaitServing();
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream = engine_->Generate(&ctx);
  ASSERT_TRUE(stream->Write(Start("r1", 300)));
  EngineOutput out;
  ASSERT_TRUE(stream->Read(&out));  // r1 runs; r2 must wait behind it.
  ASSERT_TRUE(stream->Write(Start("r2", 4)));
  for (int i = 0; i < 600; ++i) {
    grpc::ClientContext lctx;
    rill::v1::Load load;
    ASSERT_TRUE(engine_->GetLoad(&lctx, rill::v1::GetLoadRequest(), &load).ok());
    if (load.num_waiting_requests() >= 1) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(stream->Write(Start("r3", 4)));
  int r3_code = -1;
  while (stream->Read(&out)) {
    if (out.request_id() == "r3" && out.finished()) {
      r3_code = out.status().code();
      break;
    }
  }
  EXPECT_EQ(r3_code, static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
  ctx.TryCancel();
  (void)stream->Finish();
  absl::StatusOr<int> code = child_.Stop(SIGTERM, absl::Seconds(30));
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace rill::engine::service
