// Stop strings (across token boundaries, hold-back, include_stop_str) and
// malformed input, each answered on the stream while other requests go on.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "frontend/testing/frontend_fixture.h"

namespace rill::frontend::testing {
namespace {

using rill::v1::GenerateRequest;
using rill::v1::GenerateResponse;

class StopAndValidationTest : public FrontendFixture {
 protected:
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

TEST_F(StopAndValidationTest, StopStringAcrossTokensAbortsEngine) {
  // " Hello world": "o w" spans the tokens " Hello" and " world".
  auto req = Start("s1", "x", 30);
  req.mutable_start()->mutable_sampling()->add_stop("o w");
  auto rs = RunOne(req);
  EXPECT_EQ(Text(rs), " Hell");
  const auto& last = rs.back().outputs(0);
  EXPECT_EQ(last.finish_reason(), rill::v1::FINISH_REASON_STOP);
  EXPECT_EQ(last.stop_string(), "o w");
  EXPECT_TRUE(engine_->WaitForAbort("s1", absl::Seconds(10)));
}

TEST_F(StopAndValidationTest, IncludeStopString) {
  auto req = Start("s2", "x", 30);
  req.mutable_start()->mutable_sampling()->add_stop("world");
  req.mutable_start()->mutable_sampling()->add_stop("Hello");  // Earlier match wins.
  req.mutable_start()->mutable_sampling()->set_include_stop_str_in_output(true);
  auto rs = RunOne(req);
  EXPECT_EQ(Text(rs), " Hello");
  EXPECT_EQ(rs.back().outputs(0).stop_string(), "Hello");
}

TEST_F(StopAndValidationTest, HoldBackReleasesAtEnd) {
  // Generation ends right after " this": the possible stop prefix
  // " world, this" is held back until then, and released unmatched.
  const std::vector<int32_t> ids = Ids(" Hello world, this");
  auto req = Start("s3", "x", ids.size());
  req.mutable_start()->mutable_sampling()->add_stop(" world, this is X");
  auto rs = RunOne(req);
  EXPECT_EQ(Text(rs), " Hello world, this");
  for (const auto& r : rs) {
    if (r.finished()) continue;
    for (const auto& c : r.outputs()) EXPECT_EQ(c.text().find("world"), std::string::npos) << c.text();
  }
  EXPECT_EQ(rs.back().outputs(0).finish_reason(), rill::v1::FINISH_REASON_LENGTH);
}

TEST_F(StopAndValidationTest, MalformedInputsAnsweredWhileOthersContinue) {
  engine_->set_token_delay_ms(5);
  grpc::ClientContext ctx;
  auto stream = stub_->Generate(&ctx);
  ASSERT_TRUE(stream->Write(Start("good", "x", 60)));
  std::vector<std::pair<GenerateRequest, std::string>> bad;  // request, expected field
  auto add = [&](const std::string& id, auto mutate, const std::string& field) {
    GenerateRequest r = Start(id, "some prompt", 4);
    mutate(r.mutable_start());
    bad.push_back({r, field});
  };
  add("empty", [](rill::v1::StartRequest* s) { s->set_text(""); }, "start.text");
  add("noprompt", [](rill::v1::StartRequest* s) { s->clear_prompt(); }, "start.prompt");
  add("badutf8", [](rill::v1::StartRequest* s) { s->set_text("abc\xff\xfe"); }, "text");
  add("badutf8stop", [](rill::v1::StartRequest* s) { s->mutable_sampling()->add_stop("\xc3"); },
      "sampling.stop");
  std::string huge;
  for (int i = 0; i < 3000; ++i) huge += " word";
  add("huge", [&](rill::v1::StartRequest* s) { s->set_text(huge); }, "prompt");
  add("n0", [](rill::v1::StartRequest* s) { s->mutable_sampling()->set_n(0); }, "sampling.n");
  add("n65", [](rill::v1::StartRequest* s) { s->mutable_sampling()->set_n(65); }, "sampling.n");
  add("stops", [](rill::v1::StartRequest* s) {
    for (int i = 0; i < 65; ++i) s->mutable_sampling()->add_stop(absl::StrCat("s", i));
  }, "sampling.stop");
  add("longstop", [](rill::v1::StartRequest* s) {
    s->mutable_sampling()->add_stop(std::string(5000, 'a'));
  }, "sampling.stop");
  add("logprobs", [](rill::v1::StartRequest* s) { s->mutable_sampling()->set_logprobs(21); },
      "sampling.logprobs");
  add("temp", [](rill::v1::StartRequest* s) { s->mutable_sampling()->set_temperature(-1); },
      "sampling.temperature");
  add("topp", [](rill::v1::StartRequest* s) { s->mutable_sampling()->set_top_p(0); },
      "sampling.top_p");
  // (top_k -5 is valid: "<= 0: all tokens", api_contract_test.)
  add("minp", [](rill::v1::StartRequest* s) { s->mutable_sampling()->set_min_p(2); },
      "sampling.min_p");
  add("maxtok", [](rill::v1::StartRequest* s) { s->mutable_sampling()->set_max_tokens(0); },
      "sampling.max_tokens");
  add("badid", [](rill::v1::StartRequest* s) { s->mutable_token_ids()->add_ids(1 << 30); },
      "token_ids");
  add("unknown", [](rill::v1::StartRequest* s) {
    s->mutable_sampling()->GetReflection()->MutableUnknownFields(s->mutable_sampling())->AddVarint(99, 1);
  }, "unknown field number 99 in rill.v1.SamplingParams");
  // A known field with the wrong wire type (found by the request fuzzer):
  // protobuf would keep it as an unknown field and drop the value.
  add("wiretype", [](rill::v1::StartRequest* s) {
    s->mutable_sampling()->GetReflection()->MutableUnknownFields(s->mutable_sampling())->AddFixed32(2, 5);
  }, "sampling.max_tokens has the wrong wire type");
  for (const auto& [r, field] : bad) ASSERT_TRUE(stream->Write(r));
  std::vector<std::string> ids = {"good"};
  for (const auto& [r, field] : bad) ids.push_back(r.start().request_id());
  auto all = ReadAll(stream.get(), ids);
  for (const auto& [r, field] : bad) {
    const std::string& id = r.start().request_id();
    ASSERT_EQ(all[id].size(), 1u) << id;
    const GenerateResponse& resp = all[id][0];
    EXPECT_TRUE(resp.finished());
    EXPECT_EQ(resp.status().code(), grpc::StatusCode::INVALID_ARGUMENT) << id;
    EXPECT_NE(resp.status().message().find(field), std::string::npos)
        << id << ": " << resp.status().message();
  }
  EXPECT_EQ(all["good"].back().outputs(0).finish_reason(), rill::v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(all["good"].back().status().code(), 0);
  // The stream is still usable.
  ASSERT_TRUE(stream->Write(Start("after", "x", 2)));
  stream->WritesDone();
  auto more = ReadAll(stream.get(), {"after"});
  EXPECT_TRUE(more["after"].back().finished());
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(StopAndValidationTest, ChatPromptUsesTemplate) {
  GenerateRequest req;
  auto* s = req.mutable_start();
  s->set_request_id("chat");
  auto* m = s->mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("Hi!");
  s->mutable_sampling()->set_max_tokens(2);
  auto rs = RunOne(req);
  ASSERT_FALSE(rs.empty());
  EXPECT_NE(rs.front().prompt().find("<|im_start|>user\nHi!<|im_end|>"), std::string::npos)
      << rs.front().prompt();
  EXPECT_NE(rs.front().prompt().find("<|im_start|>assistant\n"), std::string::npos);
}

}  // namespace
}  // namespace rill::frontend::testing
