// The frontend's side of the API contract (issue 27), over gRPC against a
// fake engine: every malformed unary request is INVALID_ARGUMENT under one
// parse policy, validation agrees with the proto and between RPCs,
// grpc.health.v1 Watch keeps its protocol, and ServerConfig reports the
// limits that are enforced.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "frontend/testing/frontend_fixture.h"
#include "tests/util/grpc_contract.h"

namespace rill::frontend::testing {
namespace {

using grpc::health::v1::HealthCheckResponse;
using rill::tests::util::HealthWatch;
using rill::v1::GenerateRequest;
using rill::v1::GenerateResponse;

class ApiContractTest : public FrontendFixture {
 protected:
  void Customize(FrontendOptions* opts) override {
    opts->session.limits.max_n = 7;
    opts->session.limits.max_stop_strings = 5;
    opts->session.limits.max_stop_total_bytes = 100;
    opts->session.limits.max_logprobs = 3;
    opts->session.limits.max_tokens = 50;
  }

  std::vector<GenerateResponse> RunOne(const GenerateRequest& req) {
    grpc::ClientContext ctx;
    auto stream = stub_->Generate(&ctx);
    stream->Write(req);
    stream->WritesDone();
    auto all = ReadAll(stream.get(), {req.start().request_id()});
    EXPECT_TRUE(stream->Finish().ok());
    return all[req.start().request_id()];
  }
};

TEST_F(ApiContractTest, MalformedUnaryRequestsAreInvalidArgumentOnEveryMethod) {
  // Bytes that are no protobuf message, and an unknown field: the same
  // answer from every unary method (Generate says the same per request).
  EXPECT_EQ(rill::tests::util::ExpectStrictUnaryParsing(channel_, "rill.v1.Inference"), 9);
  const rill::tests::util::Metadata token = {{"authorization", absl::StrCat("Bearer ", kToken)}};
  EXPECT_EQ(rill::tests::util::ExpectStrictUnaryParsing(channel_, "rill.v1.Admin", token), 11);
  // Without the token, Admin refuses before it looks at the bytes.
  grpc::Status s = rill::tests::util::RawUnaryCall(channel_, "/rill.v1.Admin/GetStats", "\xff\xff");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  // Well-formed requests still work.
  grpc::ClientContext ctx;
  rill::v1::TokenizeRequest t;
  t.set_text("Hello");
  rill::v1::TokenizeResponse tr;
  ASSERT_TRUE(stub_->Tokenize(&ctx, t, &tr).ok());
  EXPECT_GT(tr.count(), 0);

  grpc::ClientContext gctx;
  auto stream = stub_->Generate(&gctx);
  GenerateRequest bad = Start("unknown", "x", 2);
  bad.mutable_start()->GetReflection()->MutableUnknownFields(bad.mutable_start())->AddVarint(999, 1);
  stream->Write(bad);
  stream->WritesDone();
  auto all = ReadAll(stream.get(), {"unknown"});
  ASSERT_FALSE(all["unknown"].empty());
  EXPECT_EQ(all["unknown"].back().status().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(all["unknown"].back().status().message().rfind("malformed rill.v1.GenerateRequest: ", 0),
            0u)
      << all["unknown"].back().status().message();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ApiContractTest, TopKAtOrBelowZeroMeansAllTokens) {
  // inference.proto: "top_k <= 0: all tokens"; the engine agrees.
  for (int k : {0, -1, -5}) {
    GenerateRequest req = Start(absl::StrCat("k", -k), "x", 3);
    req.mutable_start()->mutable_sampling()->set_top_k(k);
    std::vector<GenerateResponse> rs = RunOne(req);
    ASSERT_FALSE(rs.empty()) << k;
    EXPECT_EQ(rs.back().status().code(), 0) << k << ": " << rs.back().status().message();
    EXPECT_EQ(rs.back().outputs(0).finish_reason(), rill::v1::FINISH_REASON_LENGTH) << k;
  }
}

TEST_F(ApiContractTest, EmptyChatIsRejectedAlikeByGenerateAndTokenize) {
  grpc::ClientContext ctx;
  rill::v1::TokenizeRequest t;
  t.mutable_chat();  // Zero messages.
  rill::v1::TokenizeResponse tr;
  grpc::Status s = stub_->Tokenize(&ctx, t, &tr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  GenerateRequest req;
  req.mutable_start()->set_request_id("chat0");
  req.mutable_start()->mutable_chat();
  std::vector<GenerateResponse> rs = RunOne(req);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].status().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(rs[0].status().message(), s.error_message());
  EXPECT_NE(s.error_message().find("chat.messages"), std::string::npos) << s.error_message();
}

TEST_F(ApiContractTest, ServerConfigReportsTheLimitsEnforced) {
  grpc::ClientContext ctx;
  rill::v1::ServerConfig sc;
  ASSERT_TRUE(stub_->GetServerConfig(&ctx, {}, &sc).ok());
  const rill::v1::ServerConfig::Decoding& d = sc.decoding();
  EXPECT_EQ(d.max_n(), 7);
  EXPECT_EQ(d.max_stop_strings(), 5);
  EXPECT_EQ(d.max_stop_total_bytes(), 100);
  EXPECT_EQ(d.max_logprobs(), 3);
  EXPECT_EQ(d.max_tokens(), 50);
  EXPECT_EQ(d.max_prompt_tokens(), frontend_->engine()->max_model_len() - 1);
  // The frontend detokenizes, so it (not the engine) says how.
  EXPECT_EQ(d.detokenizer(), "incremental");

  // At the reported limits a request is accepted; one past, refused.
  GenerateRequest at = Start("at", "x", static_cast<int>(d.max_tokens()));
  rill::v1::SamplingParams* p = at.mutable_start()->mutable_sampling();
  p->set_n(d.max_n());
  p->set_logprobs(d.max_logprobs());
  for (int i = 0; i < d.max_stop_strings(); ++i) p->add_stop(absl::StrCat("zz", i));
  std::vector<GenerateResponse> rs = RunOne(at);
  ASSERT_FALSE(rs.empty());
  EXPECT_EQ(rs.back().status().code(), 0) << rs.back().status().message();
  for (int past = 0; past < 4; ++past) {
    GenerateRequest over = at;
    over.mutable_start()->set_request_id(absl::StrCat("over", past));
    rill::v1::SamplingParams* q = over.mutable_start()->mutable_sampling();
    if (past == 0) q->set_n(d.max_n() + 1);
    if (past == 1) q->set_logprobs(d.max_logprobs() + 1);
    if (past == 2) q->add_stop("one more");
    if (past == 3) q->set_max_tokens(d.max_tokens() + 1);
    rs = RunOne(over);
    ASSERT_FALSE(rs.empty());
    EXPECT_EQ(rs.back().status().code(), grpc::StatusCode::INVALID_ARGUMENT) << past;
  }
}

TEST_F(ApiContractTest, HealthWatchSendsChangesOnlyAndUnknownStaysUnknown) {
  HealthWatch overall(channel_, "");
  HealthWatch inference(channel_, "rill.v1.Inference");
  HealthWatch unknown(channel_, "nope");
  ASSERT_TRUE(overall.WaitForLast(HealthCheckResponse::SERVING));
  ASSERT_TRUE(inference.WaitForLast(HealthCheckResponse::SERVING));
  ASSERT_TRUE(unknown.WaitForLast(HealthCheckResponse::SERVICE_UNKNOWN));
  // The frontend probes the engine every 500 ms; an unchanged status must
  // not be sent again.
  absl::SleepFor(absl::Seconds(2));
  // A real change: the engine goes away, then comes back on the same port.
  const int port = engine_->port();
  engine_->Stop();
  ASSERT_TRUE(overall.WaitForLast(HealthCheckResponse::NOT_SERVING));
  engine_ = std::make_unique<FakeEngine>(*DefaultModelSpec());
  ASSERT_TRUE(engine_->Start(port).ok());
  ASSERT_TRUE(overall.WaitForLast(HealthCheckResponse::SERVING));
  ASSERT_TRUE(inference.WaitForLast(HealthCheckResponse::SERVING));
  absl::SleepFor(absl::Seconds(1));
  using V = std::vector<HealthWatch::ServingStatus>;
  const V changes = {HealthCheckResponse::SERVING, HealthCheckResponse::NOT_SERVING,
                     HealthCheckResponse::SERVING};
  EXPECT_EQ(overall.statuses(), changes);
  EXPECT_EQ(inference.statuses(), changes);
  EXPECT_EQ(unknown.statuses(), V{HealthCheckResponse::SERVICE_UNKNOWN});

  // Shutdown: NOT_SERVING, then the Watch streams end (they do not hold the
  // shutdown until its grace).
  const absl::Time start = absl::Now();
  frontend_->Shutdown(absl::Seconds(20));
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  ASSERT_TRUE(overall.WaitForEnd());
  EXPECT_EQ(overall.statuses().back(), HealthCheckResponse::NOT_SERVING);
  ASSERT_TRUE(unknown.WaitForEnd());
  EXPECT_EQ(unknown.statuses(), V{HealthCheckResponse::SERVICE_UNKNOWN});
}

}  // namespace
}  // namespace rill::frontend::testing
