// A dead engine (a failed step) over a real gRPC connection: health goes
// NOT_SERVING, new requests get UNAVAILABLE naming the cause, and the server
// reports how long it has been dead (rill-engine exits 3 on that). Uses the
// fake executor so the failure can be injected.
#include <memory>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/call_auth.h"
#include "engine/fake_model_executor.h"
#include "engine/service/engine_host.h"
#include "engine/service/engine_server.h"
#include "engine/service/proto_convert.h"
#include "engine/service/status_convert.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rill/internal/engine.grpc.pb.h"

namespace rill::engine::service {
namespace {

using rill::internal::EngineOutput;
using rill::internal::EngineRequest;

TEST(EngineDeadTest, DeadEngineIsNotServingAndRejectsRequests) {
  engine::FakeModelExecutor* fake = nullptr;
  EngineHost host(HostOptions{}, [&fake]() {
    auto executor = std::make_unique<engine::FakeModelExecutor>(engine::FakeModelExecutor::Options{});
    fake = executor.get();
    return engine::AsyncEngine::Create(engine::EngineArgs{}, std::move(executor));
  });
  EngineServer server(&host, "127.0.0.1:0", ::testing::TempDir(), 
                      EngineAuth{"dead-test-secret", ""});
  ASSERT_TRUE(server.Start().ok());
  host.StartLoading();
  ASSERT_TRUE(host.WaitLoaded().ok());
  auto channel = base::CreateChannelWithMetadata(absl::StrCat("127.0.0.1:", server.port()),
                                                 grpc::InsecureChannelCredentials(), {},
                                                 base::EngineCallMetadata("dead-test-secret"));
  auto stub = rill::internal::Engine::NewStub(channel);
  auto health = grpc::health::v1::Health::NewStub(channel);
  auto status = [&](const std::string& service = "") {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    (void)health->Check(&ctx, req, &resp);
    return resp.status();
  };
  for (int i = 0; i < 300 && status() != grpc::health::v1::HealthCheckResponse::SERVING; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(status(), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(status(kLivenessHealthService), grpc::health::v1::HealthCheckResponse::SERVING);

  fake->SetFailure(absl::InternalError("injected device fault"));
  grpc::ClientContext ctx;
  auto stream = stub->Generate(&ctx);
  EngineRequest start;
  start.mutable_start()->set_request_id("victim");
  for (int t : {1, 2, 3}) start.mutable_start()->add_prompt_token_ids(t);
  ASSERT_TRUE(stream->Write(start));
  EngineOutput out;
  while (stream->Read(&out) && !out.finished()) {
  }
  EXPECT_TRUE(out.finished());  // The failed request ends (error), the stream stays.
  // With the dead engine's status: UNAVAILABLE (retryable after the restart)
  // and the cause, not INTERNAL "INTERNAL: ..." (issue 27 item 8).
  EXPECT_EQ(out.status().code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE))
      << out.status().message();
  EXPECT_NE(out.status().message().find("injected device fault"), std::string::npos)
      << out.status().message();
  EXPECT_EQ(out.status().message().find("INTERNAL"), std::string::npos) << out.status().message();

  for (int i = 0; i < 300 && status() != grpc::health::v1::HealthCheckResponse::NOT_SERVING; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  // The liveness probe's service turns NOT_SERVING with it: the kubelet
  // restarts a dead engine.
  for (int i = 0; i < 300 && status(kLivenessHealthService) !=
                                 grpc::health::v1::HealthCheckResponse::NOT_SERVING; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(status(kLivenessHealthService), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  start.mutable_start()->set_request_id("after");
  ASSERT_TRUE(stream->Write(start));
  ASSERT_TRUE(stream->Read(&out));
  EXPECT_EQ(out.status().code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE));
  EXPECT_NE(out.status().message().find("dead"), std::string::npos) << out.status().message();
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  for (int i = 0; i < 300 && server.DeadFor() == absl::ZeroDuration(); ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_GT(server.DeadFor(), absl::ZeroDuration());
  server.Shutdown(absl::ZeroDuration());
}

TEST(ConvertTest, StatusRoundTripsAndSamplingParamsMap) {
  const absl::Status s = absl::ResourceExhaustedError("full");
  EXPECT_EQ(ToGrpcStatus(s).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(FromGrpcStatus(ToGrpcStatus(s)), s);
  EXPECT_EQ(FromProtoStatus(ToProtoStatus(s)), s);
  EXPECT_TRUE(FromProtoStatus(ToProtoStatus(absl::OkStatus())).ok());

  rill::v1::SamplingParams p;
  p.set_max_tokens(7);
  p.set_temperature(0.5f);
  p.set_top_p(0.9f);
  p.set_top_k(5);
  p.set_seed(42);
  p.add_stop_token_ids(3);
  p.set_repetition_penalty(1.1f);
  p.set_skip_special_tokens(false);
  absl::StatusOr<engine::SamplingParams> e = FromProto(p);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->max_tokens, 7);
  EXPECT_FLOAT_EQ(e->temperature, 0.5f);
  EXPECT_EQ(e->top_k, 5);
  EXPECT_EQ(e->seed, 42u);
  EXPECT_EQ(e->stop_token_ids, std::vector<int32_t>{3});
  EXPECT_FALSE(e->skip_special_tokens);
  EXPECT_EQ(e->output_kind, engine::OutputKind::kDelta);
  absl::StatusOr<engine::SamplingParams> back = FromProto(ToProto(*e));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->max_tokens, 7);

  // n, prompt_logprobs and logit_bias are carried to the engine, which
  // validates their ranges at admission.
  rill::v1::SamplingParams extra;
  extra.set_n(3);
  extra.set_prompt_logprobs(2);
  (*extra.mutable_logit_bias())[17] = -5.0f;
  absl::StatusOr<engine::SamplingParams> x = FromProto(extra);
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_EQ(x->n, 3);
  EXPECT_EQ(x->prompt_logprobs, 2);
  EXPECT_FLOAT_EQ(x->logit_bias.at(17), -5.0f);
  rill::v1::SamplingParams huge;
  huge.set_n(4000000000u);
  EXPECT_GT(FromProto(huge)->n, 64);  // Saturated, then refused by validation.
}

}  // namespace
}  // namespace rill::engine::service
