// Generate through the frontend against the fake engine: multiplexing,
// detokenized text, output modes, aborts, cancel and deadline.
#include <thread>

#include <gtest/gtest.h>

#include "frontend/testing/frontend_fixture.h"

namespace rill::frontend::testing {
namespace {

using rill::v1::GenerateResponse;

class GenerateTest : public FrontendFixture {};

TEST_F(GenerateTest, MultiplexedStreamsTextEqualsDetokenizedIds) {
  grpc::ClientContext ctx;
  auto stream = stub_->Generate(&ctx);
  ASSERT_TRUE(stream->Write(Start("a", "Hi there", 8)));
  ASSERT_TRUE(stream->Write(Start("b", "Another prompt", 12)));
  ASSERT_TRUE(stream->Write(Start("", "Server picks my id", 3)));
  stream->WritesDone();
  auto all = ReadAll(stream.get(), {"a", "b"});
  GenerateResponse r;
  while (stream->Read(&r)) all[r.request_id()].push_back(r);
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(all.size(), 3u);
  for (auto& [id, rs] : all) {
    ASSERT_FALSE(rs.empty());
    EXPECT_TRUE(rs.back().finished()) << id;
    EXPECT_GT(rs.front().prompt_token_ids_size(), 0);
    std::vector<int32_t> ids;
    for (const auto& x : rs) {
      for (const auto& c : x.outputs()) ids.insert(ids.end(), c.token_ids().begin(), c.token_ids().end());
    }
    EXPECT_EQ(Text(rs), Decode(ids)) << id;
    if (id != "a" && id != "b") {
      EXPECT_EQ(id.rfind("fe7-", 0), 0u) << id;
    }
  }
  EXPECT_EQ(all["a"].back().outputs(0).finish_reason(), rill::v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(all["a"].back().metrics().num_generated_tokens(), 8);
  // The engine got the tokenized prompt.
  bool found = false;
  for (const auto& s : engine_->started()) {
    if (s.request_id() == "a") {
      found = true;
      std::vector<int32_t> want = tok().Encode("Hi there", true);
      EXPECT_EQ(std::vector<int32_t>(s.prompt_token_ids().begin(), s.prompt_token_ids().end()), want);
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(GenerateTest, OutputModes) {
  const std::string want = Decode(Ids(" Hello world, this is a test"));
  auto run = [&](rill::v1::OutputMode mode) {
    grpc::ClientContext ctx;
    auto stream = stub_->Generate(&ctx);
    auto req = Start("m", "x", 7);
    req.mutable_start()->set_output_mode(mode);
    stream->Write(req);
    stream->WritesDone();
    auto all = ReadAll(stream.get(), {"m"});
    EXPECT_TRUE(stream->Finish().ok());
    return all["m"];
  };
  auto delta = run(rill::v1::OUTPUT_MODE_DELTA);
  EXPECT_EQ(Text(delta), want);
  EXPECT_GT(delta.size(), 2u);
  auto cum = run(rill::v1::OUTPUT_MODE_CUMULATIVE);
  ASSERT_GT(cum.size(), 2u);
  EXPECT_EQ(cum.back().outputs(0).text(), want);
  EXPECT_EQ(cum.back().outputs(0).token_ids_size(), 7);
  // Each cumulative text extends the previous one.
  std::string prev;
  for (const auto& r : cum) {
    for (const auto& c : r.outputs()) {
      EXPECT_EQ(c.text().rfind(prev, 0), 0u);
      prev = c.text();
    }
  }
  auto fin = run(rill::v1::OUTPUT_MODE_FINAL_ONLY);
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_TRUE(fin[0].finished());
  EXPECT_EQ(fin[0].outputs(0).text(), want);
  EXPECT_GT(fin[0].prompt_token_ids_size(), 0);
}

TEST_F(GenerateTest, LogprobsCarryTokenText) {
  grpc::ClientContext ctx;
  auto stream = stub_->Generate(&ctx);
  auto req = Start("l", "x", 3);
  req.mutable_start()->mutable_sampling()->set_logprobs(2);
  stream->Write(req);
  stream->WritesDone();
  auto all = ReadAll(stream.get(), {"l"});
  int n = 0;
  for (const auto& r : all["l"]) {
    for (const auto& c : r.outputs()) {
      for (const auto& lp : c.logprobs()) {
        ++n;
        EXPECT_EQ(lp.top_size(), 2);
        auto t = tok().Decode({lp.chosen().token_id()}, false);
        EXPECT_EQ(lp.chosen().token(), *t);
      }
    }
  }
  EXPECT_EQ(n, 3);
  stream->Finish();
}

TEST_F(GenerateTest, AbortOnStreamAndByRpc) {
  engine_->set_token_delay_ms(20);
  grpc::ClientContext ctx;
  auto stream = stub_->Generate(&ctx);
  stream->Write(Start("long1", "x", 100000));
  stream->Write(Start("long2", "x", 100000));
  stream->Write(Start("short", "x", 3));
  GenerateResponse r;
  // Wait for tokens of long1 before aborting.
  while (stream->Read(&r) && !(r.request_id() == "long1" && r.outputs_size() > 0)) {}
  stream->Write(AbortMsg("long1"));
  {
    grpc::ClientContext c;
    rill::v1::AbortRequest a;
    a.set_request_id("long2");
    rill::v1::AbortResponse resp;
    EXPECT_TRUE(stub_->Abort(&c, a, &resp).ok());
  }
  stream->Write(AbortMsg("nope"));
  auto all = ReadAll(stream.get(), {"long1", "long2", "short"});
  EXPECT_EQ(all["long1"].back().outputs(0).finish_reason(), rill::v1::FINISH_REASON_ABORT);
  EXPECT_EQ(all["long2"].back().outputs(0).finish_reason(), rill::v1::FINISH_REASON_ABORT);
  EXPECT_EQ(all["short"].back().outputs(0).finish_reason(), rill::v1::FINISH_REASON_LENGTH);
  // An abort of an unknown id is a message error: it ends no request.
  while (all["nope"].empty() && stream->Read(&r)) all[r.request_id()].push_back(r);
  ASSERT_FALSE(all["nope"].empty());
  EXPECT_EQ(all["nope"].back().message_error().code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_FALSE(all["nope"].back().finished());
  EXPECT_TRUE(engine_->WaitForAbort("long1", absl::Seconds(10)));
  {
    grpc::ClientContext c;
    rill::v1::AbortRequest a;
    a.set_request_id("never-started");
    rill::v1::AbortResponse resp;
    EXPECT_EQ(stub_->Abort(&c, a, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(GenerateTest, ClientCancelAbortsOnEngine) {
  engine_->set_token_delay_ms(20);
  grpc::ClientContext ctx;
  auto stream = stub_->Generate(&ctx);
  stream->Write(Start("c1", "x", 100000));
  GenerateResponse r;
  ASSERT_TRUE(stream->Read(&r));
  ctx.TryCancel();
  EXPECT_TRUE(engine_->WaitForAbort("c1", absl::Seconds(10)));
  stream->Finish();
}

TEST_F(GenerateTest, DeadlineExceededAbortsOnEngine) {
  engine_->set_token_delay_ms(20);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1500));
  auto stream = stub_->Generate(&ctx);
  stream->Write(Start("d1", "x", 100000));
  GenerateResponse r;
  while (stream->Read(&r)) {}
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(engine_->WaitForAbort("d1", absl::Seconds(10)));
}

}  // namespace
}  // namespace rill::frontend::testing
