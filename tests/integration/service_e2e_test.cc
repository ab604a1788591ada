// The service end to end with a C++ gRPC client: rill-engine + rill-frontend
// as separate processes on 127.0.0.1 serving the default model. Outputs are
// compared with the in-process AsyncLLMEngine on the same prompts.
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rill/v1/inference.grpc.pb.h"
#include "tests/integration/service_stack.h"

namespace rill::tests::integration {
namespace {

constexpr int kTokens = 24;
const char* const kPrompts[] = {"The capital of France is", "def fibonacci(n):",
                                "Once upon a time, in a small village,"};

// Greedy outputs of the in-process engine, computed before the stack starts
// so the two never compete for the cores.
std::map<std::string, engine::CompletionOutput>* g_reference = nullptr;

class ServiceE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_reference = new std::map<std::string, engine::CompletionOutput>();
    engine::EngineArgs args;
    args.threads = 2;
    auto eng = engine::CreateAsyncLLMEngine(args);
    ASSERT_TRUE(eng.ok()) << eng.status();
    for (const char* p : kPrompts) {
      engine::SamplingParams sp;
      sp.temperature = 0.0f;
      sp.max_tokens = kTokens;
      sp.ignore_eos = true;
      auto stream = (*eng)->Generate(p, sp, p);
      ASSERT_TRUE(stream.ok()) << stream.status();
      engine::RequestOutput last;
      while (true) {
        absl::StatusOr<engine::RequestOutput> o = (*stream)->Next(absl::Seconds(120));
        if (!o.ok()) break;
        last = *o;
      }
      ASSERT_TRUE(last.finished);
      (*g_reference)[p] = last.outputs.at(0);
    }
    eng->reset();
    stack_ = new ServiceStack();
    absl::Status s = stack_->Start({});
    ASSERT_TRUE(s.ok()) << s;
  }
  static void TearDownTestSuite() {
    delete stack_;
    stack_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(stack_, nullptr);
    channel_ = stack_->NewChannel();
    stub_ = v1::Inference::NewStub(channel_);
  }

  static ServiceStack* stack_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Inference::Stub> stub_;
};

ServiceStack* ServiceE2eTest::stack_ = nullptr;

TEST_F(ServiceE2eTest, StreamedGreedyOutputMatchesInProcessEngine) {
  for (const char* p : kPrompts) {
    absl::StatusOr<Collected> c = GenerateOnce(stub_.get(), GreedyText(p, kTokens));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->status.code(), 0) << c->status.message();
    const engine::CompletionOutput& ref = g_reference->at(p);
    EXPECT_EQ(c->token_ids, ref.token_ids) << p;
    EXPECT_EQ(c->text, ref.text) << p;
    EXPECT_EQ(c->finish_reason, v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(c->num_finished, 1);
    EXPECT_FALSE(c->request_id.empty());  // Server-assigned.
    EXPECT_GT(c->num_responses, 2) << "deltas should stream, not arrive at once";
  }
}

TEST_F(ServiceE2eTest, AbortOneOfSeveralMultiplexedRequests) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(300)));
  auto stream = stub_->Generate(&ctx);
  const std::vector<std::string> ids = {"mux-a", "mux-b", "mux-c"};
  for (size_t i = 0; i < ids.size(); ++i) {
    v1::GenerateRequest req;
    *req.mutable_start() = GreedyText(kPrompts[i], i == 1 ? 2000 : kTokens, ids[i]);
    ASSERT_TRUE(stream->Write(req));
  }
  std::map<std::string, Collected> got;
  bool aborted = false;
  v1::GenerateResponse resp;
  int finished = 0;
  while (finished < 3 && stream->Read(&resp)) {
    Collected& c = got[resp.request_id()];
    for (const v1::Completion& o : resp.outputs()) {
      c.token_ids.insert(c.token_ids.end(), o.token_ids().begin(), o.token_ids().end());
      c.text += o.text();
      if (o.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) c.finish_reason = o.finish_reason();
    }
    if (resp.finished()) {
      ++c.num_finished;
      ++finished;
    }
    if (!aborted && resp.request_id() == "mux-b" && c.token_ids.size() >= 3) {
      v1::GenerateRequest abort;
      abort.mutable_abort()->set_request_id("mux-b");
      ASSERT_TRUE(stream->Write(abort));
      aborted = true;
    }
  }
  stream->WritesDone();
  grpc::Status s = stream->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(aborted);
  EXPECT_EQ(got["mux-b"].finish_reason, v1::FINISH_REASON_ABORT);
  EXPECT_LT(got["mux-b"].token_ids.size(), 2000u);
  for (int i : {0, 2}) {
    const Collected& c = got[ids[i]];
    EXPECT_EQ(c.finish_reason, v1::FINISH_REASON_LENGTH) << ids[i];
    EXPECT_EQ(c.token_ids, g_reference->at(kPrompts[i]).token_ids) << ids[i];
    EXPECT_EQ(c.num_finished, 1);
  }
}

TEST_F(ServiceE2eTest, ConfigLoadAndHealth) {
  {
    grpc::ClientContext ctx;
    v1::ModelConfig mc;
    ASSERT_TRUE(stub_->GetModelConfig(&ctx, {}, &mc).ok());
    EXPECT_EQ(mc.vocab_size(), 49152);
    EXPECT_EQ(mc.num_layers(), 30);
    EXPECT_EQ(mc.num_attention_heads(), 9);
    EXPECT_EQ(mc.num_kv_heads(), 3);
    EXPECT_GT(mc.max_model_len(), 0);
  }
  {
    grpc::ClientContext ctx;
    v1::ServerConfig sc;
    ASSERT_TRUE(stub_->GetServerConfig(&ctx, {}, &sc).ok());
    EXPECT_EQ(sc.engine().backend(), "cpu");  // the engine's --backend auto is cpu here
    EXPECT_EQ(sc.cache().block_size(), 16);
    EXPECT_GT(sc.cache().num_blocks(), 0);
    EXPECT_EQ(sc.cache().kv_cache_dtype(), "float32");
    EXPECT_EQ(sc.parallel().tensor_parallel_size(), 1);
    EXPECT_GT(sc.scheduler().max_num_seqs(), 0);
    EXPECT_FALSE(sc.decoding().eos_token_ids().empty());
  }
  {
    grpc::ClientContext ctx;
    v1::Load load;
    ASSERT_TRUE(stub_->GetLoad(&ctx, {}, &load).ok());
    EXPECT_GE(load.kv_cache_usage(), 0.0);
  }
  {
    grpc::ClientContext ctx;
    v1::CheckHealthResponse h;
    ASSERT_TRUE(stub_->CheckHealth(&ctx, {}, &h).ok());
    EXPECT_TRUE(h.healthy()) << h.message();
  }
  absl::StatusOr<bool> overall = IsServing(channel_);
  ASSERT_TRUE(overall.ok()) << overall.status();
  EXPECT_TRUE(*overall);
  absl::StatusOr<bool> inference = IsServing(channel_, "rill.v1.Inference");
  ASSERT_TRUE(inference.ok()) << inference.status();
  EXPECT_TRUE(*inference);
}

TEST_F(ServiceE2eTest, ClientDisconnectAbortsWithinOneSecond) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  auto stream = stub_->Generate(ctx.get());
  v1::GenerateRequest req;
  *req.mutable_start() = GreedyText("Tell me a very long story.", 4000, "disconnect-me");
  ASSERT_TRUE(stream->Write(req));
  v1::GenerateResponse resp;
  int tokens = 0;
  while (tokens < 3 && stream->Read(&resp)) {
    for (const v1::Completion& o : resp.outputs()) tokens += o.token_ids_size();
  }
  ASSERT_GE(tokens, 3);
  ctx->TryCancel();
  const absl::Time cancelled = absl::Now();
  (void)stream->Finish();
  int unfinished = -1;
  while (absl::Now() - cancelled < absl::Seconds(5)) {
    grpc::ClientContext lctx;
    v1::Load load;
    ASSERT_TRUE(stub_->GetLoad(&lctx, {}, &load).ok());
    unfinished = load.num_unfinished_requests();
    if (unfinished == 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  const absl::Duration took = absl::Now() - cancelled;
  EXPECT_EQ(unfinished, 0);
  EXPECT_LT(took, absl::Seconds(1)) << "unfinished count reached 0 after " << took;
}

TEST_F(ServiceE2eTest, MalformedRequestsGetTheRightCodeAndTheStreamGoesOn) {
  struct Case {
    std::string name;
    v1::StartRequest start;
  };
  std::vector<Case> cases;
  {
    v1::StartRequest s = GreedyText("", 4, "empty");
    cases.push_back({"empty prompt", s});
  }
  {
    v1::StartRequest s = GreedyText("hi", 4, "huge-n");
    s.mutable_sampling()->set_n(1000000);
    cases.push_back({"n = 10^6", s});
  }
  {
    v1::StartRequest s = GreedyText("hi", 4, "many-stops");
    for (int i = 0; i < 100000; ++i) s.mutable_sampling()->add_stop(absl::StrCat("stop", i));
    cases.push_back({"10^5 stop strings", s});
  }
  {
    std::string big;
    for (int i = 0; i < 20000; ++i) big += "word ";
    cases.push_back({"prompt past the context", GreedyText(big, 4, "huge-prompt")});
  }
  {
    v1::StartRequest s = GreedyText("hi", 4, "neg-temp");
    s.mutable_sampling()->set_temperature(-1.0f);
    cases.push_back({"negative temperature", s});
  }
  {
    v1::StartRequest s = GreedyText("hi", 4, "bad-top-p");
    s.mutable_sampling()->set_top_p(1.5f);
    cases.push_back({"top_p > 1", s});
  }
  {
    v1::StartRequest s = GreedyText("hi", 0, "zero-max");
    cases.push_back({"max_tokens 0", s});
  }
  {
    v1::StartRequest s;
    s.set_request_id("bad-token");
    s.mutable_token_ids()->add_ids(1 << 30);
    cases.push_back({"token id past the vocabulary", s});
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  auto stream = stub_->Generate(&ctx);
  for (const Case& c : cases) {
    v1::GenerateRequest req;
    *req.mutable_start() = c.start;
    ASSERT_TRUE(stream->Write(req)) << c.name;
  }
  v1::GenerateRequest ok;
  *ok.mutable_start() = GreedyText(kPrompts[0], 4, "good-after-bad");
  ASSERT_TRUE(stream->Write(ok));
  stream->WritesDone();
  std::map<std::string, v1::GenerateResponse> last;
  v1::GenerateResponse resp;
  while (stream->Read(&resp)) last[resp.request_id()] = resp;
  grpc::Status s = stream->Finish();
  EXPECT_TRUE(s.ok()) << s.error_message();
  for (const Case& c : cases) {
    ASSERT_TRUE(last.count(c.start.request_id())) << c.name;
    const v1::GenerateResponse& r = last[c.start.request_id()];
    EXPECT_TRUE(r.finished()) << c.name;
    EXPECT_EQ(r.status().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT))
        << c.name << ": " << r.status().message();
    EXPECT_FALSE(r.status().message().empty()) << c.name;
  }
  EXPECT_EQ(last["good-after-bad"].status().code(), 0);
  EXPECT_TRUE(last["good-after-bad"].finished());
}

// n parallel samples, prompt logprobs and logit bias reach the engine and
// come back through the frontend.
TEST_F(ServiceE2eTest, ParallelSamplesPromptLogprobsAndLogitBias) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(300)));
  auto stream = stub_->Generate(&ctx);
  v1::GenerateRequest req;
  v1::StartRequest* start = req.mutable_start();
  *start = GreedyText("The capital of France is", 12, "n3");
  start->mutable_sampling()->set_n(3);
  start->mutable_sampling()->set_temperature(1.0f);
  start->mutable_sampling()->set_seed(7);
  start->mutable_sampling()->set_prompt_logprobs(2);
  ASSERT_TRUE(stream->Write(req));
  v1::GenerateRequest biased;
  *biased.mutable_start() = GreedyText("The capital of France is", 5, "bias");
  // A +100 bias on one token makes greedy pick it every time.
  (*biased.mutable_start()->mutable_sampling()->mutable_logit_bias())[1234] = 100.0f;
  ASSERT_TRUE(stream->Write(biased));
  stream->WritesDone();
  std::map<uint32_t, std::vector<int32_t>> samples;
  std::vector<int32_t> bias_ids;
  int prompt_positions = 0, finished = 0;
  v1::GenerateResponse resp;
  while (stream->Read(&resp)) {
    ASSERT_EQ(resp.status().code(), 0) << resp.status().message();
    for (const v1::Completion& o : resp.outputs()) {
      auto& ids = resp.request_id() == "n3" ? samples[o.index()] : bias_ids;
      ids.insert(ids.end(), o.token_ids().begin(), o.token_ids().end());
    }
    if (resp.request_id() == "n3") {
      prompt_positions += resp.prompt_logprobs_size();
      for (const v1::PositionLogprobs& p : resp.prompt_logprobs()) {
        EXPECT_LE(p.chosen().logprob(), 0.0f);
        EXPECT_EQ(p.top_size(), 2);
      }
    }
    finished += resp.finished();
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(finished, 2);
  ASSERT_EQ(samples.size(), 3u);
  for (const auto& [index, ids] : samples) EXPECT_EQ(ids.size(), 12u) << "sample " << index;
  EXPECT_FALSE(samples[0] == samples[1] && samples[1] == samples[2])
      << "three seeded samples at temperature 1 came out identical";
  EXPECT_EQ(prompt_positions, 4);  // 5 prompt tokens: positions 1..4.
  EXPECT_EQ(bias_ids, std::vector<int32_t>(5, 1234));
}

// Inference/Abort reaches only the caller's own requests: from another
// connection (another client that knows or guesses the id) it is NOT_FOUND
// and the request runs on; on the stream's own channel it aborts.
TEST_F(ServiceE2eTest, UnaryAbortOnlyFromTheStartingConnection) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  auto stream = stub_->Generate(&ctx);
  v1::GenerateRequest req;
  *req.mutable_start() = GreedyText("Count from one to a thousand:", 3000, "abort-elsewhere");
  ASSERT_TRUE(stream->Write(req));
  stream->WritesDone();
  v1::GenerateResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  auto other = v1::Inference::NewStub(stack_->NewChannel(/*tag=*/7));
  {
    grpc::ClientContext actx;
    v1::AbortRequest a;
    a.set_request_id("abort-elsewhere");
    v1::AbortResponse ar;
    EXPECT_EQ(other->Abort(&actx, a, &ar).error_code(), grpc::StatusCode::NOT_FOUND);
    grpc::ClientContext sctx;
    v1::GetRequestStatusRequest sr;
    sr.set_request_id("abort-elsewhere");
    v1::GetRequestStatusResponse srr;
    EXPECT_EQ(other->GetRequestStatus(&sctx, sr, &srr).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_FALSE(resp.finished()) << "another connection's Abort ended it";
  {
    grpc::ClientContext actx;
    v1::AbortRequest a;
    a.set_request_id("abort-elsewhere");
    v1::AbortResponse ar;
    grpc::Status s = stub_->Abort(&actx, a, &ar);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  while (stream->Read(&resp)) {
    for (const v1::Completion& o : resp.outputs()) {
      if (o.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) reason = o.finish_reason();
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(reason, v1::FINISH_REASON_ABORT);
  {
    grpc::ClientContext actx;
    v1::AbortRequest a;
    a.set_request_id("never-started");
    v1::AbortResponse ar;
    EXPECT_EQ(other->Abort(&actx, a, &ar).error_code(), grpc::StatusCode::NOT_FOUND);
  }
}

}  // namespace
}  // namespace rill::tests::integration
