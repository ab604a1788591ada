// Request ids are scoped per frontend: two rill-frontend replicas of one
// rill-engine may run the same client request_id side by side (each gets its
// own output), an Abort on one leaves the other's request running, and a
// duplicate id on one frontend is ALREADY_EXISTS.
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rill/v1/inference.grpc.pb.h"
#include "tests/integration/service_stack.h"

namespace rill::tests::integration {
namespace {

using Stream = grpc::ClientReaderWriter<v1::GenerateRequest, v1::GenerateResponse>;

class RequestIdIsolationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    stack_ = new ServiceStack();
    StackOptions opts;
    opts.frontends = 2;
    absl::Status started = stack_->Start(opts);
    ASSERT_TRUE(started.ok()) << started;
    // One channel (connection) per frontend: the kernel spreads connections
    // over the frontends sharing the port, GetLoad says which one answered.
    for (int tag = 0; tag < 64 && channels_.size() < 2; ++tag) {
      auto channel = stack_->NewChannel(tag);
      auto stub = v1::Inference::NewStub(channel);
      grpc::ClientContext ctx;
      v1::Load load;
      ASSERT_TRUE(stub->GetLoad(&ctx, {}, &load).ok());
      channels_.emplace(load.frontend_id(), channel);
    }
    ASSERT_EQ(channels_.size(), 2u) << "64 connections all reached one frontend";
  }
  static void TearDownTestSuite() {
    channels_.clear();
    delete stack_;
  }

  static std::shared_ptr<grpc::Channel> Frontend(int i) {
    return channels_.at(absl::StrCat(i));
  }

  static v1::GenerateRequest StartMsg(const v1::StartRequest& start) {
    v1::GenerateRequest r;
    *r.mutable_start() = start;
    return r;
  }

  static v1::RequestState StatusOf(const std::shared_ptr<grpc::Channel>& channel,
                                   const std::string& id, grpc::StatusCode* code) {
    auto stub = v1::Inference::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::GetRequestStatusRequest req;
    req.set_request_id(id);
    v1::GetRequestStatusResponse resp;
    grpc::Status s = stub->GetRequestStatus(&ctx, req, &resp);
    *code = s.error_code();
    return resp.state();
  }

  static ServiceStack* stack_;
  static std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;
};

ServiceStack* RequestIdIsolationTest::stack_ = nullptr;
std::map<std::string, std::shared_ptr<grpc::Channel>> RequestIdIsolationTest::channels_;

TEST_F(RequestIdIsolationTest, SameIdOnTwoFrontendsGivesEachItsOwnOutput) {
  const std::string prompts[2] = {"The capital of France is", "Rivers flow into the"};
  // References: each prompt alone, under distinct ids.
  std::vector<int32_t> reference[2];
  for (int i = 0; i < 2; ++i) {
    auto stub = v1::Inference::NewStub(Frontend(i));
    auto c = GenerateOnce(stub.get(), GreedyText(prompts[i], 12, absl::StrCat("ref-", i)));
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ(c->status.code(), 0) << c->status.message();
    reference[i] = c->token_ids;
  }
  ASSERT_NE(reference[0], reference[1]);

  // Several rounds of both at once under one id, so the two overlap.
  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<Collected> got[2];
    std::thread threads[2];
    for (int i = 0; i < 2; ++i) {
      threads[i] = std::thread([&, i] {
        auto stub = v1::Inference::NewStub(Frontend(i));
        got[i] = GenerateOnce(stub.get(), GreedyText(prompts[i], 12, "same-id"));
      });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(got[i].ok()) << got[i].status();
      EXPECT_EQ(got[i]->status.code(), 0) << "frontend " << i << ": " << got[i]->status.message();
      EXPECT_EQ(got[i]->request_id, "same-id");
      EXPECT_EQ(got[i]->num_finished, 1);
      EXPECT_EQ(got[i]->token_ids, reference[i]) << "frontend " << i << " round " << round;
    }
  }
}

TEST_F(RequestIdIsolationTest, AbortOnOneFrontendLeavesTheOtherRunning) {
  constexpr int kTokens = 48;
  grpc::ClientContext ctx[2];
  std::unique_ptr<Stream> stream[2];
  for (int i = 0; i < 2; ++i) {
    ctx[i].set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(300)));
    stream[i] = v1::Inference::NewStub(Frontend(i))->Generate(&ctx[i]);
    // Frontend 1's runs until we abort it at the end.
    ASSERT_TRUE(stream[i]->Write(StartMsg(
        GreedyText("Write a long story about a lighthouse.", i == 0 ? kTokens : 4000, "shared"))));
  }
  // Both are running once each has streamed a token.
  v1::GenerateResponse r;
  for (int i = 0; i < 2; ++i) {
    bool got_tokens = false;
    while (!got_tokens && stream[i]->Read(&r)) {
      ASSERT_FALSE(r.has_status() && r.status().code() != 0) << r.status().message();
      for (const auto& o : r.outputs()) got_tokens |= o.token_ids_size() > 0;
    }
    ASSERT_TRUE(got_tokens);
  }

  // Frontend 1 does not know frontend 0's other request ids.
  {
    ASSERT_TRUE(stream[0]->Write(
        StartMsg(GreedyText("Count slowly to one hundred:", kTokens, "only-on-0"))));
    auto stub = v1::Inference::NewStub(Frontend(1));
    grpc::ClientContext actx;
    v1::AbortRequest a;
    a.set_request_id("only-on-0");
    v1::AbortResponse resp;
    EXPECT_EQ(stub->Abort(&actx, a, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  // Abort "shared" on frontend 0 from another RPC on its channel.
  {
    auto stub = v1::Inference::NewStub(Frontend(0));
    grpc::ClientContext actx;
    v1::AbortRequest a;
    a.set_request_id("shared");
    v1::AbortResponse resp;
    grpc::Status s = stub->Abort(&actx, a, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  std::map<std::string, v1::FinishReason> finish0;
  while (finish0.size() < 2 && stream[0]->Read(&r)) {
    for (const auto& o : r.outputs()) {
      if (o.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) finish0[r.request_id()] = o.finish_reason();
    }
    if (r.finished() && !finish0.count(r.request_id())) {
      finish0[r.request_id()] = v1::FINISH_REASON_UNSPECIFIED;  // An error status.
    }
  }
  EXPECT_EQ(finish0["shared"], v1::FINISH_REASON_ABORT);
  EXPECT_EQ(finish0["only-on-0"], v1::FINISH_REASON_LENGTH) << "aborted by the other frontend";
  grpc::StatusCode code;
  EXPECT_EQ(StatusOf(Frontend(0), "shared", &code), v1::REQUEST_STATE_CANCELLED);
  EXPECT_EQ(code, grpc::StatusCode::OK);

  // Frontend 1's "shared" still runs: it streams more tokens, and is
  // RUNNING, after frontend 0's abort went through.
  int tokens1 = 0;
  while (tokens1 == 0 && stream[1]->Read(&r)) {
    ASSERT_FALSE(r.finished()) << "frontend 1's request ended: " << r.status().message();
    for (const auto& o : r.outputs()) tokens1 += o.token_ids_size();
  }
  EXPECT_GT(tokens1, 0);
  EXPECT_EQ(StatusOf(Frontend(1), "shared", &code), v1::REQUEST_STATE_RUNNING);
  EXPECT_EQ(code, grpc::StatusCode::OK);
  v1::GenerateRequest abort;
  abort.mutable_abort()->set_request_id("shared");
  ASSERT_TRUE(stream[1]->Write(abort));
  v1::FinishReason finish1 = v1::FINISH_REASON_UNSPECIFIED;
  while (stream[1]->Read(&r)) {
    for (const auto& o : r.outputs()) {
      if (o.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) finish1 = o.finish_reason();
    }
    if (r.finished()) break;
  }
  EXPECT_EQ(finish1, v1::FINISH_REASON_ABORT);
  for (int i = 0; i < 2; ++i) {
    stream[i]->WritesDone();
    EXPECT_TRUE(stream[i]->Finish().ok());
  }
}

TEST_F(RequestIdIsolationTest, DuplicateIdOnOneFrontendIsAlreadyExists) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(300)));
  auto stub = v1::Inference::NewStub(Frontend(0));
  auto stream = stub->Generate(&ctx);
  ASSERT_TRUE(stream->Write(StartMsg(GreedyText("Tell me about owls.", 2000, "dup"))));
  v1::GenerateResponse r;
  bool running = false;
  while (!running && stream->Read(&r)) {
    ASSERT_FALSE(r.has_status() && r.status().code() != 0) << r.status().message();
    for (const auto& o : r.outputs()) running |= o.token_ids_size() > 0;
  }
  ASSERT_TRUE(running);

  // The same id again on the same stream, then on a second stream of the
  // same frontend (same channel): both refused while the first runs.
  ASSERT_TRUE(stream->Write(StartMsg(GreedyText("Tell me about cats.", 4, "dup"))));
  auto other = GenerateOnce(stub.get(), GreedyText("Hello", 4, "dup"));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->status.code(), grpc::StatusCode::ALREADY_EXISTS) << other->status.message();

  // On the same stream the refusal is a message error: a finished response
  // would look like the running request's end.
  bool refused = false;
  while (!refused && stream->Read(&r)) {
    EXPECT_EQ(r.request_id(), "dup");
    EXPECT_FALSE(r.has_status() && r.status().code() != 0) << r.status().message();
    if (r.has_message_error()) {
      EXPECT_EQ(r.message_error().code(), grpc::StatusCode::ALREADY_EXISTS)
          << r.message_error().message();
      refused = true;
    }
    EXPECT_FALSE(r.finished()) << "the first request must keep running";
  }
  EXPECT_TRUE(refused);
  // The first request still streams, and ends only by our abort.
  v1::GenerateRequest abort;
  abort.mutable_abort()->set_request_id("dup");
  ASSERT_TRUE(stream->Write(abort));
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  while (stream->Read(&r)) {
    for (const auto& o : r.outputs()) {
      if (o.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) finish = o.finish_reason();
    }
    if (r.finished()) break;
  }
  EXPECT_EQ(finish, v1::FINISH_REASON_ABORT);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// Start 'r', abort 'r', read its ABORT response, start 'r' again: the id is
// free as soon as the client has seen the finished response, every time
// (the engine may still be cleaning up the aborted one).
TEST_F(RequestIdIsolationTest, IdIsFreeAsSoonAsItsAbortIsSeen) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(300)));
  auto stream = v1::Inference::NewStub(Frontend(0))->Generate(&ctx);
  v1::GenerateRequest abort;
  abort.mutable_abort()->set_request_id("reuse");
  for (int round = 0; round < 12; ++round) {
    ASSERT_TRUE(stream->Write(StartMsg(GreedyText("Tell me about owls.", 2000, "reuse"))));
    ASSERT_TRUE(stream->Write(abort));
    v1::GenerateResponse r;
    int finished = 0;
    while (finished == 0 && stream->Read(&r)) {
      ASSERT_EQ(r.request_id(), "reuse");
      if (!r.finished()) continue;
      ++finished;
      ASSERT_EQ(r.status().code(), 0) << "round " << round << ": " << r.status().message();
      ASSERT_EQ(r.outputs_size(), 1);
      EXPECT_EQ(r.outputs(0).finish_reason(), v1::FINISH_REASON_ABORT);
    }
    ASSERT_EQ(finished, 1) << "round " << round;
  }
  ASSERT_TRUE(stream->Write(StartMsg(GreedyText("Hello", 4, "reuse"))));
  stream->WritesDone();
  v1::GenerateResponse r;
  int finished = 0;
  while (stream->Read(&r)) {
    if (!r.finished()) continue;
    ++finished;
    EXPECT_EQ(r.status().code(), 0) << r.status().message();
  }
  EXPECT_EQ(finished, 1);
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace rill::tests::integration
