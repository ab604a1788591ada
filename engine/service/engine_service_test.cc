// rill.internal.Engine and rill.v1.Admin over a real gRPC connection on
// 127.0.0.1, served by an EngineServer around the real default model.
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/service/local_engine_server.h"
#include "engine/service/proto_convert.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spec_proto.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rill/internal/engine.grpc.pb.h"
#include "rill/v1/admin.grpc.pb.h"

namespace rill::engine::service {
namespace {

using rill::internal::EngineOutput;
using rill::internal::EngineRequest;
using Stream = grpc::ClientReaderWriter<EngineRequest, EngineOutput>;

class EngineServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<LocalEngineServer>> local = StartLocalEngineServer(256);
    ASSERT_TRUE(local.ok()) << local.status();
    local_ = local->release();
  }
  static void TearDownTestSuite() { delete local_; }

  void SetUp() override {
    channel_ = local_->NewChannel();
    engine_ = rill::internal::Engine::NewStub(channel_);
    admin_ = rill::v1::Admin::NewStub(channel_);
    health_ = grpc::health::v1::Health::NewStub(channel_);
    WaitServing(true);
  }

  bool HealthServing(const std::string& service) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status s = health_->Check(&ctx, req, &resp);
    return s.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  }

  // The poller updates health every 100 ms; wait generously.
  void WaitServing(bool serving) {
    for (int i = 0; i < 300 && HealthServing("rill.internal.Engine") != serving; ++i) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    ASSERT_EQ(HealthServing("rill.internal.Engine"), serving);
    ASSERT_EQ(HealthServing(""), serving);
  }

  static EngineRequest Start(const std::string& id, std::vector<int32_t> prompt, int max_tokens,
                             bool ignore_eos = false) {
    EngineRequest r;
    r.mutable_start()->set_request_id(id);
    for (int32_t t : prompt) r.mutable_start()->add_prompt_token_ids(t);
    r.mutable_start()->mutable_sampling()->set_temperature(0);
    r.mutable_start()->mutable_sampling()->set_max_tokens(max_tokens);
    r.mutable_start()->mutable_sampling()->set_ignore_eos(ignore_eos);
    return r;
  }

  static EngineRequest Abort(const std::string& id) {
    EngineRequest r;
    r.mutable_abort()->set_request_id(id);
    return r;
  }

  std::vector<int32_t> Encode(const std::string& text) {
    return local_->tokenizer.get()->Encode(text, true);
  }

  // Greedy tokens from the in-process engine, for comparison.
  std::vector<int32_t> InProcess(const std::vector<int32_t>& prompt, int max_tokens) {
    engine::SamplingParams params;
    params.temperature = 0;
    params.max_tokens = max_tokens;
    params.output_kind = engine::OutputKind::kFinalOnly;
    auto stream = local_->host->engine()->Generate(prompt, params, absl::StrCat("local-", ++counter_));
    EXPECT_TRUE(stream.ok());
    std::vector<int32_t> tokens;
    while (true) {
      absl::StatusOr<engine::RequestOutput> out = (*stream)->Next(absl::Seconds(120));
      if (!out.ok()) break;
      if (out->finished) tokens = out->outputs[0].token_ids;
    }
    return tokens;
  }

  struct Result {
    std::vector<int32_t> tokens;
    rill::v1::FinishReason finish = rill::v1::FINISH_REASON_UNSPECIFIED;
    int code = -1;
    bool has_metrics = false;
  };

  // Reads until every id in `results` has finished.
  static void ReadAll(Stream* stream, std::map<std::string, Result>* results) {
    size_t done = 0;
    EngineOutput out;
    while (done < results->size() && stream->Read(&out)) {
      Result& r = (*results)[out.request_id()];
      for (const auto& c : out.outputs()) {
        r.tokens.insert(r.tokens.end(), c.token_ids().begin(), c.token_ids().end());
        if (c.finish_reason() != rill::v1::FINISH_REASON_UNSPECIFIED) r.finish = c.finish_reason();
      }
      if (out.finished()) {
        r.code = out.status().code();
        r.has_metrics = out.has_metrics();
        ++done;
      }
    }
  }

  static LocalEngineServer* local_;
  static int counter_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rill::internal::Engine::Stub> engine_;
  std::unique_ptr<rill::v1::Admin::Stub> admin_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

LocalEngineServer* EngineServiceTest::local_ = nullptr;
int EngineServiceTest::counter_ = 0;

TEST_F(EngineServiceTest, MultiplexedGreedyMatchesInProcessEngine) {
  const std::vector<std::string> prompts = {"The capital of France is", "1, 2, 3, 4,",
                                            "Once upon a time"};
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream = engine_->Generate(&ctx);
  std::map<std::string, Result> results;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string id = absl::StrCat("mux-", i);
    results[id];
    ASSERT_TRUE(stream->Write(Start(id, Encode(prompts[i]), 12)));
  }
  ReadAll(stream.get(), &results);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Result& r = results[absl::StrCat("mux-", i)];
    EXPECT_EQ(r.code, 0);
    EXPECT_TRUE(r.has_metrics);
    EXPECT_NE(r.finish, rill::v1::FINISH_REASON_UNSPECIFIED);
    EXPECT_EQ(r.tokens, InProcess(Encode(prompts[i]), 12)) << prompts[i];
  }
}

TEST_F(EngineServiceTest, PerRequestErrorsKeepTheStreamServing) {
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream = engine_->Generate(&ctx);
  const std::vector<int32_t> prompt = Encode("Hello there");
  ASSERT_TRUE(stream->Write(Start("long", prompt, 40, /*ignore_eos=*/true)));
  EngineRequest bad_n = Start("bad-n", prompt, 4);
  bad_n.mutable_start()->mutable_sampling()->set_n(1000000);  // n is capped at 64
  EngineRequest bad_temp = Start("bad-temp", prompt, 4);
  bad_temp.mutable_start()->mutable_sampling()->set_temperature(-1);
  EngineRequest bad_bias = Start("bad-bias", prompt, 4);
  // Token id outside the vocabulary.
  (*bad_bias.mutable_start()->mutable_sampling()->mutable_logit_bias())[10000000] = 1.0f;
  EngineRequest lora = Start("lora", prompt, 4);
  lora.mutable_start()->set_lora_name("nope");
  ASSERT_TRUE(stream->Write(bad_n));
  ASSERT_TRUE(stream->Write(bad_temp));
  ASSERT_TRUE(stream->Write(bad_bias));
  ASSERT_TRUE(stream->Write(lora));
  ASSERT_TRUE(stream->Write(Start("long", prompt, 4)));  // Duplicate.
  ASSERT_TRUE(stream->Write(Start("empty", {}, 4)));
  ASSERT_TRUE(stream->Write(Start("", prompt, 4)));
  ASSERT_TRUE(stream->Write(Start("huge", std::vector<int32_t>(300, prompt[0]), 4)));
  ASSERT_TRUE(stream->Write(Start("ok", prompt, 4)));
  std::map<std::string, Result> results = {
      {"long", {}}, {"bad-n", {}}, {"bad-temp", {}}, {"bad-bias", {}}, {"lora", {}},
      {"empty", {}}, {"", {}},     {"huge", {}},     {"ok", {}}};
  // The duplicate's error arrives under "long" before its real end: read
  // until the real end, counting that error.
  int dup_code = -1;
  size_t done = 0;
  EngineOutput out;
  while (done < results.size() && stream->Read(&out)) {
    Result& r = results[out.request_id()];
    for (const auto& c : out.outputs()) {
      r.tokens.insert(r.tokens.end(), c.token_ids().begin(), c.token_ids().end());
    }
    if (!out.finished()) continue;
    if (out.request_id() == "long" && out.status().code() != 0) {
      dup_code = out.status().code();
      continue;
    }
    r.code = out.status().code();
    ++done;
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  const int kInvalid = static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(results["bad-n"].code, kInvalid);
  EXPECT_EQ(results["bad-temp"].code, kInvalid);
  EXPECT_EQ(results["bad-bias"].code, kInvalid);
  EXPECT_EQ(results["lora"].code, static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(dup_code, static_cast<int>(grpc::StatusCode::ALREADY_EXISTS));
  EXPECT_EQ(results["empty"].code, kInvalid);
  EXPECT_EQ(results[""].code, kInvalid);
  EXPECT_EQ(results["huge"].code, kInvalid);
  EXPECT_EQ(results["ok"].code, 0);
  EXPECT_EQ(results["ok"].tokens.size(), results["ok"].tokens.size());
  EXPECT_EQ(results["long"].code, 0);
  EXPECT_EQ(results["long"].tokens.size(), 40u);
}

TEST_F(EngineServiceTest, AbortViaStreamAndViaRpc) {
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream = engine_->Generate(&ctx);
  const std::vector<int32_t> prompt = Encode("Tell me a long story");
  ASSERT_TRUE(stream->Write(Start("a1", prompt, 200, true)));
  ASSERT_TRUE(stream->Write(Start("a2", prompt, 200, true)));
  EngineOutput out;
  bool sent = false;
  std::map<std::string, Result> results;
  size_t done = 0;
  while (done < 2 && stream->Read(&out)) {
    if (!sent) {
      sent = true;
      ASSERT_TRUE(stream->Write(Abort("a1")));
      // From another connection.
      grpc::ClientContext actx;
      rill::v1::AbortRequest req;
      req.set_request_id("a2");
      rill::v1::AbortResponse resp;
      EXPECT_TRUE(engine_->Abort(&actx, req, &resp).ok());
    }
    Result& r = results[out.request_id()];
    for (const auto& c : out.outputs()) {
      r.tokens.insert(r.tokens.end(), c.token_ids().begin(), c.token_ids().end());
      if (c.finish_reason() != rill::v1::FINISH_REASON_UNSPECIFIED) r.finish = c.finish_reason();
    }
    if (out.finished()) ++done;
  }
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(results["a1"].finish, rill::v1::FINISH_REASON_ABORT);
  EXPECT_EQ(results["a2"].finish, rill::v1::FINISH_REASON_ABORT);
  EXPECT_LT(results["a1"].tokens.size(), 200u);

  grpc::ClientContext sctx;
  rill::v1::GetRequestStatusRequest sreq;
  sreq.set_request_id("a1");
  rill::v1::GetRequestStatusResponse sresp;
  ASSERT_TRUE(engine_->GetRequestStatus(&sctx, sreq, &sresp).ok());
  EXPECT_EQ(sresp.state(), rill::v1::REQUEST_STATE_CANCELLED);

  grpc::ClientContext nctx;
  rill::v1::AbortRequest nreq;
  nreq.set_request_id("never-started");
  rill::v1::AbortResponse nresp;
  EXPECT_EQ(engine_->Abort(&nctx, nreq, &nresp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(EngineServiceTest, CancelledStreamAbortsItsRequestsWithinOneSecond) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  std::unique_ptr<Stream> stream = engine_->Generate(ctx.get());
  const std::vector<int32_t> prompt = Encode("Count to a thousand:");
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(stream->Write(Start(absl::StrCat("c", i), prompt, 200, true)));
  }
  EngineOutput out;
  ASSERT_TRUE(stream->Read(&out));  // Running.
  EXPECT_GT(local_->host->engine()->GetNumUnfinishedRequests(), 0);
  ctx->TryCancel();
  const absl::Time cancelled = absl::Now();
  while (local_->host->engine()->GetNumUnfinishedRequests() > 0 &&
         absl::Now() - cancelled < absl::Seconds(1)) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(local_->host->engine()->GetNumUnfinishedRequests(), 0);
  (void)stream->Finish();
}

TEST_F(EngineServiceTest, SleepMakesHealthNotServingAndGenerateUnavailable) {
  grpc::ClientContext c1;
  rill::v1::SleepRequest sreq;
  rill::v1::SleepResponse sresp;
  ASSERT_TRUE(admin_->Sleep(&c1, sreq, &sresp).ok());
  grpc::ClientContext c2;
  rill::v1::IsSleepingResponse is;
  ASSERT_TRUE(admin_->IsSleeping(&c2, rill::v1::IsSleepingRequest(), &is).ok());
  EXPECT_TRUE(is.sleeping());
  EXPECT_EQ(is.level(), 1);
  WaitServing(false);
  {
    grpc::ClientContext ctx;
    std::unique_ptr<Stream> stream = engine_->Generate(&ctx);
    ASSERT_TRUE(stream->Write(Start("asleep", Encode("Hi"), 4)));
    EngineOutput out;
    ASSERT_TRUE(stream->Read(&out));
    EXPECT_EQ(out.status().code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE));
    EXPECT_NE(out.status().message().find("sleeping"), std::string::npos);
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  grpc::ClientContext hctx;
  rill::v1::CheckHealthResponse health;
  ASSERT_TRUE(engine_->CheckHealth(&hctx, rill::v1::CheckHealthRequest(), &health).ok());
  EXPECT_FALSE(health.healthy());
  grpc::ClientContext c3;
  rill::v1::WakeUpResponse wresp;
  ASSERT_TRUE(admin_->WakeUp(&c3, rill::v1::WakeUpRequest(), &wresp).ok());
  WaitServing(true);
}

TEST_F(EngineServiceTest, AdminRpcs) {
  {
    grpc::ClientContext ctx;
    rill::v1::StartProfileResponse resp;
    ASSERT_TRUE(admin_->StartProfile(&ctx, rill::v1::StartProfileRequest(), &resp).ok());
  }
  InProcess(Encode("profile me"), 3);
  {
    grpc::ClientContext ctx;
    rill::v1::StopProfileResponse resp;
    ASSERT_TRUE(admin_->StopProfile(&ctx, rill::v1::StopProfileRequest(), &resp).ok());
    EXPECT_FALSE(resp.trace_path().empty());
  }
  {
    grpc::ClientContext ctx;
    rill::v1::ResetPrefixCacheResponse resp;
    EXPECT_TRUE(admin_->ResetPrefixCache(&ctx, rill::v1::ResetPrefixCacheRequest(), &resp).ok());
  }
  {
    grpc::ClientContext ctx;
    rill::v1::Stats resp;
    ASSERT_TRUE(admin_->GetStats(&ctx, rill::v1::GetStatsRequest(), &resp).ok());
    EXPECT_GT(resp.generation_tokens_total(), 0);
  }
  {
    grpc::ClientContext ctx;
    rill::v1::ListLorasResponse resp;
    EXPECT_TRUE(admin_->ListLoras(&ctx, rill::v1::ListLorasRequest(), &resp).ok());
    EXPECT_EQ(resp.adapters_size(), 0);
  }
  {
    grpc::ClientContext ctx;
    rill::v1::AddLoraResponse resp;
    EXPECT_EQ(admin_->AddLora(&ctx, rill::v1::AddLoraRequest(), &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    // No lora_root configured: run-time loading is refused.
    grpc::ClientContext ctx;
    rill::v1::AddLoraRequest req;
    req.set_name("x");
    req.set_path("/etc");
    rill::v1::AddLoraResponse resp;
    EXPECT_EQ(admin_->AddLora(&ctx, req, &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    grpc::ClientContext ctx;
    rill::v1::RemoveLoraResponse resp;
    EXPECT_EQ(admin_->RemoveLora(&ctx, rill::v1::RemoveLoraRequest(), &resp).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    rill::v1::CollectiveRpcRequest req;
    req.set_method("ping");
    rill::v1::CollectiveRpcResponse resp;
    ASSERT_TRUE(admin_->CollectiveRpc(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.results_json_size(), 1);
  }
  {
    grpc::ClientContext ctx;
    rill::v1::CollectiveRpcRequest req;
    req.set_method("execute_model");
    rill::v1::CollectiveRpcResponse resp;
    EXPECT_EQ(admin_->CollectiveRpc(&ctx, req, &resp).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    // A 10 KB method name is cut short in the message: the code stays
    // PERMISSION_DENIED (not RESOURCE_EXHAUSTED from oversized trailers).
    grpc::ClientContext ctx;
    rill::v1::CollectiveRpcRequest req;
    req.set_method(std::string(10 << 10, 'm'));
    rill::v1::CollectiveRpcResponse resp;
    grpc::Status s = admin_->CollectiveRpc(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message().substr(0, 200);
    EXPECT_LT(s.error_message().size(), 300u);
  }
}

TEST_F(EngineServiceTest, ConfigLoadAndEncode) {
  {
    grpc::ClientContext ctx;
    rill::v1::ModelConfig resp;
    ASSERT_TRUE(engine_->GetModelConfig(&ctx, rill::v1::GetModelConfigRequest(), &resp).ok());
    EXPECT_EQ(resp.architecture(), "llama");
    EXPECT_EQ(resp.max_model_len(), 256);
    EXPECT_GT(resp.vocab_size(), 0);
    EXPECT_TRUE(resp.has_chat_template());
    EXPECT_TRUE(resp.supports_embeddings());  // Encode works on the decoder (below).
  }
  {
    grpc::ClientContext ctx;
    rill::v1::ServerConfig resp;
    ASSERT_TRUE(engine_->GetServerConfig(&ctx, rill::v1::GetServerConfigRequest(), &resp).ok());
    EXPECT_EQ(resp.parallel().tensor_parallel_size(), 1);
    // The CPU kernel plan chosen at load (the default matmul: exact).
    EXPECT_EQ(resp.engine().kernel_plan().rfind("exact (", 0), 0u) << resp.engine().kernel_plan();
    EXPECT_GT(resp.cache().num_blocks(), 0);
    // The limits the engine enforces itself (the frontend adds its own).
    EXPECT_EQ(resp.decoding().max_n(), 64);
    EXPECT_EQ(resp.decoding().max_logprobs(), 20);
    // The token-only engine does not detokenize, so it names no detokenizer.
    EXPECT_EQ(resp.decoding().detokenizer(), "");
    // No latency targets: the fixed step budget.
    EXPECT_EQ(resp.scheduler().target_itl_ms(), 0);
    EXPECT_EQ(resp.scheduler().target_ttft_ms(), 0);
    EXPECT_EQ(resp.scheduler().step_token_budget(), resp.scheduler().max_num_batched_tokens());
  }
  {
    grpc::ClientContext ctx;
    rill::v1::Load resp;
    ASSERT_TRUE(engine_->GetLoad(&ctx, rill::v1::GetLoadRequest(), &resp).ok());
    EXPECT_EQ(resp.num_unfinished_requests(), 0);
  }
  {
    grpc::ClientContext ctx;
    rill::v1::EncodeResponse resp;
    grpc::Status s = engine_->Encode(&ctx, rill::internal::EngineEncodeRequest(), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
}

// Encode on the decoder: LAST pooling by default, normalized; validation
// errors map to INVALID_ARGUMENT.
TEST_F(EngineServiceTest, EncodePoolsDecoderHiddenStates) {
  rill::internal::EngineEncodeRequest req;
  req.set_request_id("embed-1");
  for (int32_t t : Encode("The capital of France is")) req.add_prompt_token_ids(t);
  rill::v1::EncodeResponse a, b;
  {
    grpc::ClientContext ctx;
    grpc::Status s = engine_->Encode(&ctx, req, &a);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(a.request_id(), "embed-1");
  EXPECT_EQ(a.num_prompt_tokens(), req.prompt_token_ids_size());
  ASSERT_EQ(a.embedding_size(), 576);
  double norm = 0;
  for (float x : a.embedding()) norm += double(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-5);
  req.mutable_pooling()->set_type(rill::v1::POOLING_TYPE_MEAN);
  req.mutable_pooling()->set_dimensions(128);
  req.mutable_pooling()->set_normalize(false);
  {
    grpc::ClientContext ctx;
    grpc::Status s = engine_->Encode(&ctx, req, &b);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(b.embedding_size(), 128);
  req.mutable_pooling()->set_dimensions(577);
  {
    grpc::ClientContext ctx;
    grpc::Status s = engine_->Encode(&ctx, req, &b);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("dimensions"), std::string::npos) << s.error_message();
  }
  req.mutable_pooling()->set_dimensions(0);
  for (int i = 0; i < 300; ++i) req.add_prompt_token_ids(1);  // Past max_model_len 256.
  {
    grpc::ClientContext ctx;
    grpc::Status s = engine_->Encode(&ctx, req, &b);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("max_model_len"), std::string::npos) << s.error_message();
  }
}

TEST_F(EngineServiceTest, TokenizerSpecRebuildsAnIdenticalTokenizer) {
  grpc::ClientContext ctx;
  rill::internal::TokenizerSpec spec;
  ASSERT_TRUE(engine_->GetTokenizer(&ctx, rill::internal::GetTokenizerRequest(), &spec).ok());
  EXPECT_EQ(spec.max_model_len(), 256);
  absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> rebuilt =
      tokenizer::BpeTokenizer::Create(tokenizer::SpecFromProto(spec));
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  const tokenizer::BpeTokenizer* local = local_->tokenizer.get();
  for (const std::string text :
       {"Hello, world!", "  spaces\tand\nnewlines  ", "<|im_start|>user\nhi<|im_end|>",
        "naïve café 日本語 🙂", "x = 3.14159 ** 2"}) {
    EXPECT_EQ((*rebuilt)->Encode(text, true), local->Encode(text, true)) << text;
    std::vector<int32_t> ids = local->Encode(text, false);
    EXPECT_EQ((*rebuilt)->Decode(ids, false), local->Decode(ids, false)) << text;
  }
}

}  // namespace
}  // namespace rill::engine::service
