// The engine server's side of the API contract (issue 27), over gRPC on
// 127.0.0.1 with the fake executor (so a failure can be injected): every
// malformed unary request is INVALID_ARGUMENT, grpc.health.v1 Watch sends
// only changes and keeps unknown services unknown, and Admin.GetStats counts
// finished, aborted and failed requests.
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/fake_model_executor.h"
#include "engine/service/engine_host.h"
#include "engine/service/engine_server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rill/internal/engine.grpc.pb.h"
#include "rill/v1/admin.grpc.pb.h"
#include "base/call_auth.h"
#include "tests/util/grpc_contract.h"

namespace rill::engine::service {
namespace {

using grpc::health::v1::HealthCheckResponse;
using rill::internal::EngineOutput;
using rill::internal::EngineRequest;
using rill::tests::util::HealthWatch;

class EngineApiContractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine::FakeModelExecutor::Options o;
    o.step_delay = absl::Milliseconds(5);
    host_ = std::make_unique<EngineHost>(HostOptions{}, [this, o]() {
      auto executor = std::make_unique<engine::FakeModelExecutor>(o);
      fake_ = executor.get();
      return engine::AsyncEngine::Create(engine::EngineArgs{}, std::move(executor));
    });
    server_ = std::make_unique<EngineServer>(host_.get(), "127.0.0.1:0", ::testing::TempDir(),
                                             EngineAuth{"contract-secret", "contract-token"});
    ASSERT_TRUE(server_->Start().ok());
    host_->StartLoading();
    ASSERT_TRUE(host_->WaitLoaded().ok());
    // Every call carries the engine's credentials (the contract under test
    // is the parse policy, past authentication).
    channel_ = base::CreateChannelWithMetadata(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials(),
        grpc::ChannelArguments(), base::EngineCallMetadata("contract-secret", "contract-token"));
    engine_ = rill::internal::Engine::NewStub(channel_);
    admin_ = rill::v1::Admin::NewStub(channel_);
    HealthWatch serving(channel_, "");
    ASSERT_TRUE(serving.WaitForLast(HealthCheckResponse::SERVING));
  }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::ZeroDuration());
  }

  static EngineRequest Start(const std::string& id, int max_tokens) {
    EngineRequest r;
    r.mutable_start()->set_request_id(id);
    for (int t : {1, 2, 3}) r.mutable_start()->add_prompt_token_ids(t);
    r.mutable_start()->mutable_sampling()->set_max_tokens(max_tokens);
    r.mutable_start()->mutable_sampling()->set_ignore_eos(true);
    return r;
  }

  rill::v1::Stats Stats() {
    grpc::ClientContext ctx;
    rill::v1::Stats stats;
    EXPECT_TRUE(admin_->GetStats(&ctx, rill::v1::GetStatsRequest(), &stats).ok());
    return stats;
  }

  engine::FakeModelExecutor* fake_ = nullptr;
  std::unique_ptr<EngineHost> host_;
  std::unique_ptr<EngineServer> server_;  // After host_: destroyed first.
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rill::internal::Engine::Stub> engine_;
  std::unique_ptr<rill::v1::Admin::Stub> admin_;
};

TEST_F(EngineApiContractTest, MalformedUnaryRequestsAreInvalidArgumentOnEveryMethod) {
  EXPECT_EQ(rill::tests::util::ExpectStrictUnaryParsing(channel_, "rill.internal.Engine"), 8);
  EXPECT_EQ(rill::tests::util::ExpectStrictUnaryParsing(channel_, "rill.v1.Admin"), 11);
  EXPECT_EQ(rill::tests::util::ExpectStrictUnaryParsing(channel_, "grpc.health.v1.Health"), 1);
  // Nothing was slept by a malformed Sleep.
  grpc::ClientContext ctx;
  rill::v1::IsSleepingResponse sleeping;
  ASSERT_TRUE(admin_->IsSleeping(&ctx, {}, &sleeping).ok());
  EXPECT_FALSE(sleeping.sleeping());
}

TEST_F(EngineApiContractTest, StatsCountFinishedAbortedAndFailedRequests) {
  const rill::v1::Stats before = Stats();
  EXPECT_EQ(before.requests_finished_total(), 0);
  grpc::ClientContext ctx;
  auto stream = engine_->Generate(&ctx);
  // 200 tokens take the fake executor >= 1 s (5 ms a step): "long" is
  // still running when it is aborted.
  ASSERT_TRUE(stream->Write(Start("done", 3)));
  ASSERT_TRUE(stream->Write(Start("long", 200)));
  EngineOutput out;
  bool done = false;
  bool long_started = false;
  while (!(done && long_started) && stream->Read(&out)) {
    if (out.request_id() == "done" && out.finished()) done = true;
    if (out.request_id() == "long") long_started = true;
  }
  ASSERT_TRUE(done && long_started);
  EngineRequest abort;
  abort.mutable_abort()->set_request_id("long");
  ASSERT_TRUE(stream->Write(abort));
  while (stream->Read(&out) && !(out.request_id() == "long" && out.finished())) {
  }
  ASSERT_TRUE(out.finished());
  ASSERT_GT(out.outputs_size(), 0);
  EXPECT_EQ(out.outputs(0).finish_reason(), rill::v1::FINISH_REASON_ABORT);
  rill::v1::Stats after = Stats();
  EXPECT_EQ(after.requests_finished_total(), 1);
  EXPECT_EQ(after.requests_aborted_total(), 1);
  EXPECT_EQ(after.requests_failed_total(), 0);

  // A failed step fails the running request: counted as failed.
  ASSERT_TRUE(stream->Write(Start("victim", 200)));
  ASSERT_TRUE(stream->Read(&out));
  fake_->SetFailure(absl::InternalError("injected device fault"));
  while (!(out.request_id() == "victim" && out.finished()) && stream->Read(&out)) {
  }
  ASSERT_TRUE(out.finished());
  EXPECT_EQ(out.status().code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  after = Stats();
  EXPECT_EQ(after.requests_finished_total(), 1);
  EXPECT_EQ(after.requests_aborted_total(), 1);
  EXPECT_EQ(after.requests_failed_total(), 1);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(EngineApiContractTest, HealthWatchSendsChangesOnlyAndUnknownStaysUnknown) {
  HealthWatch overall(channel_, "");
  HealthWatch engine(channel_, "rill.internal.Engine");
  HealthWatch unknown(channel_, "nope");
  ASSERT_TRUE(overall.WaitForLast(HealthCheckResponse::SERVING));
  ASSERT_TRUE(engine.WaitForLast(HealthCheckResponse::SERVING));
  ASSERT_TRUE(unknown.WaitForLast(HealthCheckResponse::SERVICE_UNKNOWN));
  // The engine dies (a failed step): NOT_SERVING, once, to the known
  // services; the unknown one hears nothing more.
  grpc::ClientContext ctx;
  auto stream = engine_->Generate(&ctx);
  ASSERT_TRUE(stream->Write(Start("victim", 200)));
  EngineOutput out;
  ASSERT_TRUE(stream->Read(&out));
  fake_->SetFailure(absl::InternalError("injected device fault"));
  ASSERT_TRUE(overall.WaitForLast(HealthCheckResponse::NOT_SERVING));
  ASSERT_TRUE(engine.WaitForLast(HealthCheckResponse::NOT_SERVING));
  // The health poller runs every 100 ms: time to re-send, which it must not.
  absl::SleepFor(absl::Seconds(1));
  using V = std::vector<HealthWatch::ServingStatus>;
  const V changes = {HealthCheckResponse::SERVING, HealthCheckResponse::NOT_SERVING};
  EXPECT_EQ(overall.statuses(), changes);
  EXPECT_EQ(engine.statuses(), changes);
  EXPECT_EQ(unknown.statuses(), V{HealthCheckResponse::SERVICE_UNKNOWN});
  ctx.TryCancel();
  (void)stream->Finish();

  // Shutdown ends every Watch at once, even with a long grace.
  const absl::Time start = absl::Now();
  server_->Shutdown(absl::Seconds(20));
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  ASSERT_TRUE(overall.WaitForEnd());
  ASSERT_TRUE(unknown.WaitForEnd());
  EXPECT_EQ(unknown.statuses(), V{HealthCheckResponse::SERVICE_UNKNOWN});
}

}  // namespace
}  // namespace rill::engine::service
