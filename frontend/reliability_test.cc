// Slow clients, admission limits and deadlines over a real gRPC frontend on
// 127.0.0.1 (fake engine behind it).
#include <thread>

#include <gtest/gtest.h>

#include "frontend/testing/frontend_fixture.h"

namespace rill::frontend::testing {
namespace {

using rill::v1::GenerateResponse;

class ReliabilityTest : public FrontendFixture {
 protected:
  void Customize(FrontendOptions* opts) override {
    opts->session.send_buffer_messages = 16;
    opts->session.stall_timeout = absl::Seconds(1);
    opts->session.max_pending_requests = 3;
    opts->session.limits.max_tokens = 100000;
    opts->session.limits.max_prompt_tokens = 50;
    opts->session.limits.max_n = 4;
    opts->session.limits.max_stop_strings = 3;
    opts->session.limits.max_stop_total_bytes = 10;
    opts->session.limits.max_logprobs = 5;
    opts->server_transport.max_receive_bytes = 64 << 10;
    opts->server_transport.keepalive_time = absl::Seconds(5);
  }

  // One request on its own stream; the final response.
  GenerateResponse RunOne(const rill::v1::GenerateRequest& req) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto stream = stub_->Generate(&ctx);
    stream->Write(req);
    stream->WritesDone();
    auto all = ReadAll(stream.get(), {req.start().request_id()});
    stream->Finish();
    auto& rs = all[req.start().request_id()];
    return rs.empty() ? GenerateResponse() : rs.back();
  }
};

TEST_F(ReliabilityTest, SlowClientDoesNotBlockOthersAndIsEnded) {
  std::vector<int32_t> script;
  for (int i = 0; i < 200; ++i) {
    for (int32_t t : Ids(" Some filler text that makes every response a bit longer.")) {
      script.push_back(t);
    }
  }
  engine_->set_script(script);
  // The slow client starts a long request and never reads.
  grpc::ClientContext slow_ctx;
  auto slow = stub_->Generate(&slow_ctx);
  ASSERT_TRUE(slow->Write(Start("slow", "x", 100000)));

  // Meanwhile other clients on the same frontend still finish.
  for (int i = 0; i < 3; ++i) {
    GenerateResponse r = RunOne(Start("fast" + std::to_string(i), "x", 5));
    EXPECT_TRUE(r.finished());
    EXPECT_EQ(r.status().code(), 0) << r.status().message();
  }
  // The slow stream's request is aborted at the engine after the stall timeout.
  EXPECT_TRUE(engine_->WaitForAbort("slow", absl::Seconds(30)));
  // Draining it now ends in an error, not a hang.
  GenerateResponse r;
  while (slow->Read(&r)) {
  }
  grpc::Status st = slow->Finish();
  EXPECT_FALSE(st.ok());
  // As documented: RESOURCE_EXHAUSTED with the cause, not CANCELLED.
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("client was not reading"), std::string::npos)
      << st.error_message();
  // The pending slot of the aborted request was released.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(RunOne(Start("after" + std::to_string(i), "x", 2)).status().code(), 0);
  }
}

TEST_F(ReliabilityTest, MaxPendingRequests) {
  engine_->set_token_delay_ms(20);
  grpc::ClientContext ctx;
  auto stream = stub_->Generate(&ctx);
  for (int i = 0; i < 3; ++i) stream->Write(Start("p" + std::to_string(i), "x", 100000));
  stream->Write(Start("over", "x", 3));
  auto all = ReadAll(stream.get(), {"over"});
  EXPECT_EQ(all["over"].back().status().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(all["over"].back().status().message().find("max_pending_requests"), std::string::npos);
  // Aborting one frees a slot.
  stream->Write(AbortMsg("p0"));
  ReadAll(stream.get(), {"p0"});
  stream->Write(Start("fits", "x", 2));
  all = ReadAll(stream.get(), {"fits"});
  EXPECT_EQ(all["fits"].back().status().code(), 0) << all["fits"].back().status().message();
  ctx.TryCancel();
}

TEST_F(ReliabilityTest, PerRequestLimits) {
  struct Case {
    std::function<void(rill::v1::StartRequest*)> edit;
    std::string needle;
  };
  std::vector<Case> cases = {
      {[](rill::v1::StartRequest* s) { s->mutable_sampling()->set_max_tokens(100001); },
       "max_tokens_limit"},
      {[](rill::v1::StartRequest* s) {
         std::string t;
         for (int i = 0; i < 80; ++i) t += " word";
         s->set_text(t);
       },
       "max_prompt_tokens"},
      {[](rill::v1::StartRequest* s) { s->mutable_sampling()->set_n(5); }, "sampling.n"},
      {[](rill::v1::StartRequest* s) {
         for (int i = 0; i < 4; ++i) s->mutable_sampling()->add_stop("a");
       },
       "stop strings"},
      {[](rill::v1::StartRequest* s) { s->mutable_sampling()->add_stop("0123456789x"); },
       "total 11 bytes"},
      {[](rill::v1::StartRequest* s) { s->mutable_sampling()->set_logprobs(6); },
       "sampling.logprobs"},
  };
  for (const Case& c : cases) {
    rill::v1::GenerateRequest req = Start("lim", "x", 3);
    c.edit(req.mutable_start());
    GenerateResponse r = RunOne(req);
    EXPECT_EQ(r.status().code(), grpc::StatusCode::INVALID_ARGUMENT) << c.needle;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(RunOne(Start("ok", "x", 3)).status().code(), 0);
}

TEST_F(ReliabilityTest, DeadlineMidGeneration) {
  engine_->set_token_delay_ms(20);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1500));
  auto stream = stub_->Generate(&ctx);
  stream->Write(Start("dl", "x", 100000));
  GenerateResponse r;
  ASSERT_TRUE(stream->Read(&r));
  while (stream->Read(&r)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(engine_->WaitForAbort("dl", absl::Seconds(10)));
}

TEST_F(ReliabilityTest, MessageOverTheLimit) {
  {
    grpc::ClientContext c;
    rill::v1::TokenizeRequest t;
    t.set_text(std::string(100 << 10, 'a'));
    rill::v1::TokenizeResponse tr;
    EXPECT_EQ(stub_->Tokenize(&c, t, &tr).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  grpc::ClientContext ctx;
  auto stream = stub_->Generate(&ctx);
  stream->Write(Start("big", std::string(100 << 10, 'a'), 3));
  GenerateResponse r;
  while (stream->Read(&r)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Under the limit is fine.
  grpc::ClientContext c;
  rill::v1::TokenizeRequest t;
  t.set_text("Hello");
  rill::v1::TokenizeResponse tr;
  EXPECT_TRUE(stub_->Tokenize(&c, t, &tr).ok());
}

}  // namespace
}  // namespace rill::frontend::testing
