// Request ids scoped by the `rill-session` metadata (base/engine_session.h)
// over a real gRPC connection to an EngineServer with the default model: two
// sessions run the same id side by side, and Abort / GetRequestStatus with a
// session see only that session's request.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "base/engine_session.h"
#include "engine/service/local_engine_server.h"
#include "rill/internal/engine.grpc.pb.h"

namespace rill::engine::service {
namespace {

using rill::internal::EngineOutput;
using rill::internal::EngineRequest;

class SessionScopeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<LocalEngineServer>> local = StartLocalEngineServer(512);
    ASSERT_TRUE(local.ok()) << local.status();
    local_ = local->release();
  }
  static void TearDownTestSuite() { delete local_; }

  void SetUp() override {
    stub_ = rill::internal::Engine::NewStub(local_->NewChannel());
  }

  static EngineRequest Start(const std::string& id, const std::string& text, int max_tokens) {
    EngineRequest r;
    r.mutable_start()->set_request_id(id);
    for (int32_t t : local_->tokenizer.get()->Encode(text, true)) {
      r.mutable_start()->add_prompt_token_ids(t);
    }
    r.mutable_start()->mutable_sampling()->set_temperature(0);
    r.mutable_start()->mutable_sampling()->set_max_tokens(max_tokens);
    r.mutable_start()->mutable_sampling()->set_ignore_eos(true);
    return r;
  }

  // A context carrying `session` ("" = none), with a deadline so that a
  // broken scoping fails the test instead of hanging it.
  static std::unique_ptr<grpc::ClientContext> Context(const std::string& session) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    if (!session.empty()) ctx->AddMetadata(base::kEngineSessionMetadata, session);
    return ctx;
  }

  struct Run {
    std::vector<int32_t> tokens;
    rill::v1::FinishReason finish = rill::v1::FINISH_REASON_UNSPECIFIED;
    int code = 0;
  };

  // Reads `stream` until its request `id` finished.
  static Run ReadUntilFinished(
      grpc::ClientReaderWriter<EngineRequest, EngineOutput>* stream, const std::string& id) {
    Run run;
    EngineOutput out;
    while (stream->Read(&out)) {
      EXPECT_EQ(out.request_id(), id);
      for (const auto& c : out.outputs()) {
        run.tokens.insert(run.tokens.end(), c.token_ids().begin(), c.token_ids().end());
        if (c.finish_reason() != rill::v1::FINISH_REASON_UNSPECIFIED) run.finish = c.finish_reason();
      }
      if (out.finished()) {
        run.code = out.status().code();
        break;
      }
    }
    return run;
  }

  grpc::StatusCode Abort(const std::string& session, const std::string& id) {
    auto ctx = Context(session);
    rill::v1::AbortRequest req;
    req.set_request_id(id);
    rill::v1::AbortResponse resp;
    return stub_->Abort(ctx.get(), req, &resp).error_code();
  }

  rill::v1::RequestState State(const std::string& session, const std::string& id,
                               grpc::StatusCode* code) {
    auto ctx = Context(session);
    rill::v1::GetRequestStatusRequest req;
    req.set_request_id(id);
    rill::v1::GetRequestStatusResponse resp;
    grpc::Status s = stub_->GetRequestStatus(ctx.get(), req, &resp);
    *code = s.error_code();
    if (s.ok()) {
      EXPECT_EQ(resp.request_id(), id);
    }
    return resp.state();
  }

  static LocalEngineServer* local_;
  std::unique_ptr<rill::internal::Engine::Stub> stub_;
};

LocalEngineServer* SessionScopeTest::local_ = nullptr;

TEST_F(SessionScopeTest, TwoSessionsRunTheSameIdAndAbortStaysInItsSession) {
  auto ctx_a = Context("fe-a.1");
  auto ctx_b = Context("fe-b.1");
  auto a = stub_->Generate(ctx_a.get());
  auto b = stub_->Generate(ctx_b.get());
  // Same id on both streams; b's runs until aborted.
  ASSERT_TRUE(a->Write(Start("x", "The capital of France is", 480)));
  ASSERT_TRUE(b->Write(Start("x", "Rivers flow into the", 480)));
  EngineOutput out;
  ASSERT_TRUE(a->Read(&out));
  EXPECT_EQ(out.status().code(), 0) << out.status().message();
  ASSERT_TRUE(b->Read(&out));
  EXPECT_EQ(out.status().code(), 0) << "second session's start refused: " << out.status().message();

  // No session, or a third one, does not see "x".
  EXPECT_EQ(Abort("", "x"), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Abort("fe-c.1", "x"), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Abort("fe-a.1", "x"), grpc::StatusCode::OK);
  Run ra = ReadUntilFinished(a.get(), "x");
  EXPECT_EQ(ra.finish, rill::v1::FINISH_REASON_ABORT);
  grpc::StatusCode code;
  EXPECT_EQ(State("fe-a.1", "x", &code), rill::v1::REQUEST_STATE_CANCELLED);
  EXPECT_EQ(code, grpc::StatusCode::OK);
  // b's "x" is still running after a's was aborted and finished.
  EXPECT_EQ(State("fe-b.1", "x", &code), rill::v1::REQUEST_STATE_RUNNING);
  EXPECT_EQ(code, grpc::StatusCode::OK);
  EXPECT_EQ(State("fe-c.1", "x", &code), rill::v1::REQUEST_STATE_UNSPECIFIED);
  EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND);

  // Aborting on b's own stream ends it.
  EngineRequest abort;
  abort.mutable_abort()->set_request_id("x");
  ASSERT_TRUE(b->Write(abort));
  Run rb = ReadUntilFinished(b.get(), "x");
  EXPECT_EQ(rb.finish, rill::v1::FINISH_REASON_ABORT);
  a->WritesDone();
  b->WritesDone();
  EXPECT_TRUE(a->Finish().ok());
  EXPECT_TRUE(b->Finish().ok());
}

TEST_F(SessionScopeTest, SameIdInBothSessionsGivesEachItsOwnGreedyOutput) {
  const std::string prompts[2] = {"The capital of France is", "1, 2, 3, 4,"};
  std::vector<int32_t> alone[2];
  for (int i = 0; i < 2; ++i) {
    auto ctx = Context("");
    auto s = stub_->Generate(ctx.get());
    ASSERT_TRUE(s->Write(Start(absl::StrCat("alone-", i), prompts[i], 8)));
    alone[i] = ReadUntilFinished(s.get(), absl::StrCat("alone-", i)).tokens;
    s->WritesDone();
    EXPECT_TRUE(s->Finish().ok());
  }
  auto ctx_a = Context("fe-a.2");
  auto ctx_b = Context("fe-b.2");
  auto a = stub_->Generate(ctx_a.get());
  auto b = stub_->Generate(ctx_b.get());
  ASSERT_TRUE(a->Write(Start("same", prompts[0], 8)));
  ASSERT_TRUE(b->Write(Start("same", prompts[1], 8)));
  Run ra = ReadUntilFinished(a.get(), "same");
  Run rb = ReadUntilFinished(b.get(), "same");
  EXPECT_EQ(ra.code, 0);
  EXPECT_EQ(rb.code, 0);
  EXPECT_EQ(ra.tokens, alone[0]);
  EXPECT_EQ(rb.tokens, alone[1]);
  // Within one session a running id is still ALREADY_EXISTS.
  ASSERT_TRUE(a->Write(Start("dup", prompts[0], 480)));
  EngineOutput out;
  ASSERT_TRUE(a->Read(&out));
  ASSERT_TRUE(a->Write(Start("dup", prompts[1], 4)));
  bool refused = false;
  while (!refused && a->Read(&out)) {
    refused = out.status().code() == grpc::StatusCode::ALREADY_EXISTS;
  }
  EXPECT_TRUE(refused);
  EXPECT_EQ(Abort("fe-a.2", "dup"), grpc::StatusCode::OK);
  (void)ReadUntilFinished(a.get(), "dup");
  a->WritesDone();
  b->WritesDone();
  EXPECT_TRUE(a->Finish().ok());
  EXPECT_TRUE(b->Finish().ok());
}

// Ids are bounded (the engine keeps them, also in its finished-status
// table), and long client input quoted in errors is cut short, so the answer
// keeps its code instead of RESOURCE_EXHAUSTED "metadata size exceeds limit".
TEST_F(SessionScopeTest, LongIdsAreRefusedAndNotEchoed) {
  auto ctx = Context("fe-l.1");
  auto s = stub_->Generate(ctx.get());
  ASSERT_TRUE(s->Write(Start(std::string(1 << 20, 'h'), "Hello", 4)));
  EngineOutput out;
  ASSERT_TRUE(s->Read(&out));
  EXPECT_TRUE(out.request_id().empty());
  EXPECT_EQ(out.status().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(out.status().message().find("limit of 256 bytes"), std::string::npos)
      << out.status().message();
  // The stream stays open.
  ASSERT_TRUE(s->Write(Start("fine", "Hello", 4)));
  EXPECT_EQ(ReadUntilFinished(s.get(), "fine").code, 0);
  s->WritesDone();
  EXPECT_TRUE(s->Finish().ok());

  const std::string long_id(10 << 10, 'x');
  EXPECT_EQ(Abort("fe-l.1", long_id), grpc::StatusCode::INVALID_ARGUMENT);
  grpc::StatusCode code;
  State("fe-l.1", long_id, &code);
  EXPECT_EQ(code, grpc::StatusCode::INVALID_ARGUMENT);
  {
    // A 10 KB LoRA name: NOT_FOUND with a short message.
    auto c = Context("fe-l.1");
    rill::internal::EngineEncodeRequest req;
    req.set_request_id("enc");
    req.add_prompt_token_ids(1);
    req.set_lora_name(std::string(10 << 10, 'l'));
    rill::v1::EncodeResponse resp;
    grpc::Status st = stub_->Encode(c.get(), req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message().substr(0, 200);
    EXPECT_LT(st.error_message().size(), 200u);
  }
}

}  // namespace
}  // namespace rill::engine::service
