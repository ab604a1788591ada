// Generate stream semantics and bounds over a real gRPC frontend on
// 127.0.0.1 (fake engine behind it): one finished response per request,
// message errors apart from request ends, ids reusable once finished,
// bounded and unguessable ids, per-connection Abort / GetRequestStatus, and
// never-reading clients ended RESOURCE_EXHAUSTED by bytes and by stalled
// writes.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "frontend/testing/frontend_fixture.h"

namespace rill::frontend::testing {
namespace {

using rill::v1::GenerateResponse;

// A channel with its own TCP connection (a local subchannel pool), i.e. another client.
std::shared_ptr<grpc::Channel> OtherConnection(int port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), args);
}

class StreamSemanticsTest : public FrontendFixture {
 protected:
  // Reads until a response for `id` satisfies `pred`; every response is
  // appended to `seen`.
  template <typename Pred>
  bool ReadUntil(GenStream* stream, const std::string& id, Pred pred,
                 std::vector<GenerateResponse>* seen) {
    GenerateResponse r;
    while (stream->Read(&r)) {
      seen->push_back(r);
      if (r.request_id() == id && pred(r)) return true;
    }
    return false;
  }
  static int CountFinished(const std::vector<GenerateResponse>& rs, const std::string& id) {
    int n = 0;
    for (const auto& r : rs) n += r.request_id() == id && r.finished();
    return n;
  }
};

TEST_F(StreamSemanticsTest, MessageErrorsNeverLookLikeTheEndOfARequest) {
  engine_->set_token_delay_ms(5);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub_->Generate(&ctx);
  std::vector<GenerateResponse> seen;
  ASSERT_TRUE(stream->Write(Start("r", "x", 100000)));
  ASSERT_TRUE(ReadUntil(stream.get(), "r", [](const GenerateResponse& r) {
    return r.outputs_size() > 0 && r.outputs(0).token_ids_size() > 0;
  }, &seen));
  // A duplicate start while "r" runs: a message error, not r's end.
  ASSERT_TRUE(stream->Write(Start("r", "y", 3)));
  ASSERT_TRUE(ReadUntil(stream.get(), "r", [](const GenerateResponse& r) {
    return r.has_message_error();
  }, &seen));
  EXPECT_EQ(seen.back().message_error().code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_FALSE(seen.back().finished());
  EXPECT_FALSE(seen.back().has_status());
  EXPECT_EQ(CountFinished(seen, "r"), 0) << "the running request must go on";
  // Its abort ends it, once.
  ASSERT_TRUE(stream->Write(AbortMsg("r")));
  ASSERT_TRUE(ReadUntil(stream.get(), "r", [](const GenerateResponse& r) { return r.finished(); },
                        &seen));
  EXPECT_EQ(seen.back().outputs(0).finish_reason(), rill::v1::FINISH_REASON_ABORT);
  // Aborting it again, or an id never started: message errors.
  ASSERT_TRUE(stream->Write(AbortMsg("r")));
  ASSERT_TRUE(ReadUntil(stream.get(), "r", [](const GenerateResponse& r) {
    return r.has_message_error();
  }, &seen));
  EXPECT_EQ(seen.back().message_error().code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(stream->Write(AbortMsg("never")));
  ASSERT_TRUE(ReadUntil(stream.get(), "never", [](const GenerateResponse& r) {
    return r.has_message_error();
  }, &seen));
  EXPECT_EQ(seen.back().message_error().code(), grpc::StatusCode::NOT_FOUND);
  stream->WritesDone();
  GenerateResponse r;
  while (stream->Read(&r)) seen.push_back(r);
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(CountFinished(seen, "r"), 1);
  EXPECT_EQ(CountFinished(seen, "never"), 0);
}

TEST_F(StreamSemanticsTest, IdIsFreeOnceItsAbortIsSeen) {
  engine_->set_token_delay_ms(5);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub_->Generate(&ctx);
  std::vector<GenerateResponse> seen;
  for (int round = 0; round < 12; ++round) {
    ASSERT_TRUE(stream->Write(Start("r", "x", 100000)));
    ASSERT_TRUE(stream->Write(AbortMsg("r")));
    ASSERT_TRUE(ReadUntil(stream.get(), "r", [](const GenerateResponse& r) {
      return r.finished();
    }, &seen));
    ASSERT_EQ(seen.back().status().code(), 0) << "round " << round << ": " << seen.back().status().message();
    EXPECT_EQ(seen.back().outputs(0).finish_reason(), rill::v1::FINISH_REASON_ABORT);
  }
  ASSERT_TRUE(stream->Write(Start("r", "x", 3)));
  ASSERT_TRUE(ReadUntil(stream.get(), "r", [](const GenerateResponse& r) { return r.finished(); },
                        &seen));
  EXPECT_EQ(seen.back().status().code(), 0) << seen.back().status().message();
  EXPECT_EQ(seen.back().outputs(0).finish_reason(), rill::v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(CountFinished(seen, "r"), 13);
  EXPECT_EQ(engine_->started().size(), 13u);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(StreamSemanticsTest, RequestIdsAreBoundedAndLongInputIsNotEchoed) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub_->Generate(&ctx);
  std::vector<GenerateResponse> seen;
  const std::string huge(1 << 20, 'h');
  ASSERT_TRUE(stream->Write(Start(huge, "x", 3)));
  ASSERT_TRUE(stream->Write(AbortMsg(std::string(10 << 10, 'a'))));
  ASSERT_TRUE(stream->Write(Start("ok", "x", 3)));
  ASSERT_TRUE(ReadUntil(stream.get(), "ok", [](const GenerateResponse& r) { return r.finished(); },
                        &seen));
  int refused = 0;
  for (const auto& r : seen) {
    if (r.request_id() == "ok") continue;
    EXPECT_TRUE(r.request_id().empty());
    EXPECT_FALSE(r.finished());
    EXPECT_EQ(r.message_error().code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(r.message_error().message(), "limit of 256 bytes"))
        << r.message_error().message();
    EXPECT_LT(r.ByteSizeLong(), 1024u);
    ++refused;
  }
  EXPECT_EQ(refused, 2);
  EXPECT_EQ(seen.back().status().code(), 0) << "the stream stays open";
  for (const auto& s : engine_->started()) EXPECT_LE(s.request_id().size(), 256u);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  // Unary calls: the intended code, not RESOURCE_EXHAUSTED from an echo.
  for (const std::string& id : {std::string(10 << 10, 'b'), std::string(300, 'c')}) {
    grpc::ClientContext c1;
    rill::v1::AbortRequest a;
    a.set_request_id(id);
    rill::v1::AbortResponse ar;
    EXPECT_EQ(stub_->Abort(&c1, a, &ar).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    grpc::ClientContext c2;
    rill::v1::GetRequestStatusRequest g;
    g.set_request_id(id);
    rill::v1::GetRequestStatusResponse gr;
    grpc::Status s = stub_->GetRequestStatus(&c2, g, &gr);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_LT(s.error_message().size(), 200u);
  }
}

TEST_F(StreamSemanticsTest, ServerIdsAreUnguessableAndOnlyTheirClientMayAbortThem) {
  engine_->set_token_delay_ms(5);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub_->Generate(&ctx);
  rill::v1::GenerateRequest anon = Start("", "x", 100000);
  ASSERT_TRUE(stream->Write(anon));
  ASSERT_TRUE(stream->Write(anon));
  ASSERT_TRUE(stream->Write(Start("mine", "x", 100000)));
  std::set<std::string> ids;
  GenerateResponse r;
  while (ids.size() < 3 && stream->Read(&r)) ids.insert(r.request_id());
  ASSERT_EQ(ids.size(), 3u);
  for (const std::string& id : ids) {
    if (id == "mine") continue;
    // "fe7-" + 128 bits in hex: nothing a client could count its way to.
    ASSERT_EQ(id.size(), 4u + 32u) << id;
    EXPECT_EQ(id.substr(0, 4), "fe7-");
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef", 4), std::string::npos) << id;
  }
  // Another client (connection) knows the ids: still NOT_FOUND, both calls.
  auto other = rill::v1::Inference::NewStub(OtherConnection(frontend_->port()));
  for (const std::string& id : ids) {
    grpc::ClientContext c1;
    rill::v1::AbortRequest a;
    a.set_request_id(id);
    rill::v1::AbortResponse ar;
    EXPECT_EQ(other->Abort(&c1, a, &ar).error_code(), grpc::StatusCode::NOT_FOUND) << id;
    grpc::ClientContext c2;
    rill::v1::GetRequestStatusRequest g;
    g.set_request_id(id);
    rill::v1::GetRequestStatusResponse gr;
    EXPECT_EQ(other->GetRequestStatus(&c2, g, &gr).error_code(), grpc::StatusCode::NOT_FOUND) << id;
  }
  EXPECT_TRUE(engine_->aborted().empty()) << "another client's Abort reached the engine";
  // Its own client (the stream's connection) may.
  auto status_of = [&](const std::string& id, grpc::StatusCode* code) {
    grpc::ClientContext c;
    rill::v1::GetRequestStatusRequest g;
    g.set_request_id(id);
    rill::v1::GetRequestStatusResponse gr;
    *code = stub_->GetRequestStatus(&c, g, &gr).error_code();
    return gr.state();
  };
  grpc::StatusCode code;
  rill::v1::RequestState state = status_of("mine", &code);
  EXPECT_EQ(code, grpc::StatusCode::OK);
  EXPECT_TRUE(state == rill::v1::REQUEST_STATE_RUNNING || state == rill::v1::REQUEST_STATE_WAITING);
  for (const std::string& id : ids) {
    grpc::ClientContext c;
    rill::v1::AbortRequest a;
    a.set_request_id(id);
    rill::v1::AbortResponse ar;
    EXPECT_TRUE(stub_->Abort(&c, a, &ar).ok()) << id;
  }
  std::vector<std::string> want(ids.begin(), ids.end());
  auto all = ReadAll(stream.get(), want);
  for (const std::string& id : ids) {
    ASSERT_FALSE(all[id].empty()) << id;
    EXPECT_TRUE(all[id].back().finished());
    EXPECT_EQ(all[id].back().outputs(0).finish_reason(), rill::v1::FINISH_REASON_ABORT);
  }
  EXPECT_EQ(status_of("mine", &code), rill::v1::REQUEST_STATE_CANCELLED);
  EXPECT_EQ(code, grpc::StatusCode::OK);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// Never-reading clients, with the message cap out of reach.
class NeverReadingClientTest : public FrontendFixture {
 protected:
  void Customize(FrontendOptions* opts) override {
    opts->session.send_buffer_messages = 1 << 20;
    opts->session.send_buffer_bytes = 256 << 10;
    opts->session.stall_timeout = absl::Seconds(stall_s_);
  }
  // Starts `req` on a stream that is never read until the request was
  // aborted at the engine; then the call's status.
  grpc::Status RunNeverReading(const rill::v1::GenerateRequest& req) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto stream = stub_->Generate(&ctx);
    EXPECT_TRUE(stream->Write(req));
    EXPECT_TRUE(engine_->WaitForAbort(req.start().request_id(), absl::Seconds(45)))
        << "a never-reading client was not ended";
    GenerateResponse r;
    while (stream->Read(&r)) {
    }
    return stream->Finish();
  }
  int stall_s_ = 120;
};

TEST_F(NeverReadingClientTest, BytesBoundedBufferEndsIt) {
  std::vector<int32_t> script;
  for (int i = 0; i < 50; ++i) {
    for (int32_t t : Ids(" Some filler text that makes the completion grow quickly.")) {
      script.push_back(t);
    }
  }
  engine_->set_script(script);
  // Cumulative: each response carries the whole completion so far, so bytes
  // grow far faster than the count of responses.
  rill::v1::GenerateRequest req = Start("big", "x", 100000);
  req.mutable_start()->set_output_mode(rill::v1::OUTPUT_MODE_CUMULATIVE);
  grpc::Status st = RunNeverReading(req);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "client was not reading")) << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "twice its limit")) << st.error_message();
  // The frontend serves others afterwards.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub_->Generate(&ctx);
  stream->Write(Start("after", "x", 3));
  stream->WritesDone();
  auto all = ReadAll(stream.get(), {"after"});
  ASSERT_FALSE(all["after"].empty());
  EXPECT_EQ(all["after"].back().status().code(), 0);
  EXPECT_TRUE(stream->Finish().ok());
}

class StalledWriteTest : public NeverReadingClientTest {
 protected:
  void Customize(FrontendOptions* opts) override {
    stall_s_ = 1;
    NeverReadingClientTest::Customize(opts);
    opts->session.send_buffer_bytes = 64 << 20;
  }
};

TEST_F(StalledWriteTest, SmallResponsesStillEndIt) {
  // Small DELTA responses, far fewer than the message cap: detected because
  // the transport stops taking them.
  grpc::Status st = RunNeverReading(Start("small", "x", 400000));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "no response could be written"))
      << st.error_message();
}

}  // namespace
}  // namespace rill::frontend::testing
