// rill.v1.Inference/Encode end to end: rill-engine serving all-MiniLM-L6-v2
// (BERT) behind rill-frontend, over real gRPC on 127.0.0.1. The frontend
// tokenizes text with the WordPiece tokenizer it got from the engine.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "base/model_dir.h"
#include "rill/v1/inference.grpc.pb.h"
#include "tests/integration/service_stack.h"
#include "tests/util/python_runner.h"

namespace rill::tests::integration {
namespace {

grpc::Status Encode(v1::Inference::Stub* stub, const v1::EncodeRequest& req, v1::EncodeResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  return stub->Encode(&ctx, req, resp);
}

double Dot(const v1::EncodeResponse& a, const v1::EncodeResponse& b) {
  double d = 0;
  for (int i = 0; i < a.embedding_size(); ++i) d += double(a.embedding(i)) * b.embedding(i);
  return d;
}

// all-MiniLM-L6-v2 on sentence-transformers' example pair: 8 tokens, a unit
// 384-vector, and the published similarity 0.7553 within `tolerance`.
void ExpectPublishedSimilarity(v1::Inference::Stub* stub, double tolerance) {
  v1::EncodeRequest req;
  req.set_text("A man is eating food.");
  v1::EncodeResponse a, b;
  grpc::Status s = Encode(stub, req, &a);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(a.request_id().empty());
  EXPECT_EQ(a.num_prompt_tokens(), 8);
  ASSERT_EQ(a.embedding_size(), 384);
  EXPECT_NEAR(Dot(a, a), 1.0, 1e-5);
  req.set_text("A man is eating a piece of bread.");
  ASSERT_TRUE(Encode(stub, req, &b).ok());
  EXPECT_NEAR(Dot(a, b), 0.7553, tolerance);
}

TEST(EmbeddingsE2eTest, BertEncodeOverTheFrontend) {
  ServiceStack stack;
  StackOptions options;
  options.engine_flags = {"--model=" + base::DefaultEmbedModelPath()};
  absl::Status started = stack.Start(options);
  ASSERT_TRUE(started.ok()) << started;
  auto stub = v1::Inference::NewStub(stack.NewChannel());
  ExpectPublishedSimilarity(stub.get(), 2e-3);
  v1::EncodeRequest req;
  req.set_text("A man is eating a piece of bread.");
  v1::EncodeResponse b;
  grpc::Status s;

  // Token ids, CLS pooling, Matryoshka dimensions.
  v1::EncodeRequest ids;
  for (int32_t t : {101, 7592, 2088, 102}) ids.mutable_token_ids()->add_ids(t);
  ids.mutable_pooling()->set_type(v1::POOLING_TYPE_CLS);
  ids.mutable_pooling()->set_dimensions(32);
  v1::EncodeResponse c;
  s = Encode(stub.get(), ids, &c);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(c.embedding_size(), 32);

  // Bad input: clear errors with the right codes.
  v1::EncodeRequest bad;
  EXPECT_EQ(Encode(stub.get(), bad, &c).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  for (int i = 0; i < 600; ++i) bad.mutable_text()->append(" word");  // 602 tokens > 512.
  s = Encode(stub.get(), bad, &c);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("max_model_len"), std::string::npos) << s.error_message();
  ids.mutable_pooling()->set_dimensions(1000);
  s = Encode(stub.get(), ids, &c);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();

  // Generation is not what an encoder does.
  grpc::ClientContext ctx;
  auto stream = stub->Generate(&ctx);
  v1::GenerateRequest g;
  g.mutable_start()->set_text("hello");
  g.mutable_start()->mutable_sampling()->set_max_tokens(4);
  ASSERT_TRUE(stream->Write(g));
  stream->WritesDone();
  v1::GenerateResponse r;
  bool saw_error = false;
  while (stream->Read(&r)) {
    if (r.status().code() != 0 || r.finished()) {
      saw_error = r.status().code() == static_cast<int>(grpc::StatusCode::UNIMPLEMENTED);
      break;
    }
  }
  EXPECT_TRUE(saw_error) << r.DebugString();
  stream->Finish();
  // Still serving embeddings afterwards.
  EXPECT_TRUE(Encode(stub.get(), req, &b).ok());
}

// The same model as a llama.cpp-style GGUF (tests/reference/bert_gguf.py,
// Q8_0 as llama.cpp users quantize embedders): the engine loads it, ships
// the GGUF's WordPiece vocabulary to the frontend as a tokenizer, and a
// request without a pooling type gets the GGUF's pooling_type.
std::string ConvertToGguf(const std::vector<std::string>& extra) {
  const std::string out = std::string(std::getenv("TEST_TMPDIR")) + "/minilm-" +
                          std::to_string(extra.size()) + ".gguf";
  std::vector<std::string> args = {base::DefaultEmbedModelPath(), out, "--outtype", "q8_0"};
  args.insert(args.end(), extra.begin(), extra.end());
  absl::StatusOr<util::CommandResult> r = util::RunPython("tests/reference/bert_gguf.py", args);
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->output;
  return out;
}

TEST(EmbeddingsE2eTest, BertGgufOverTheFrontend) {
  ServiceStack stack;
  StackOptions options;
  options.engine_flags = {"--model=" + ConvertToGguf({})};
  absl::Status started = stack.Start(options);
  ASSERT_TRUE(started.ok()) << started;
  auto stub = v1::Inference::NewStub(stack.NewChannel());
  ExpectPublishedSimilarity(stub.get(), 4e-3);  // Q8_0 weights: a little further off.
}

TEST(EmbeddingsE2eTest, GgufPoolingTypeIsTheDefault) {
  ServiceStack stack;
  StackOptions options;
  options.engine_flags = {"--model=" + ConvertToGguf({"--pooling_type", "2"})};  // CLS
  absl::Status started = stack.Start(options);
  ASSERT_TRUE(started.ok()) << started;
  auto stub = v1::Inference::NewStub(stack.NewChannel());
  v1::EncodeRequest req;
  req.set_text("A man is eating food.");
  v1::EncodeResponse by_default, cls, mean;
  ASSERT_TRUE(Encode(stub.get(), req, &by_default).ok());
  req.mutable_pooling()->set_type(v1::POOLING_TYPE_CLS);
  ASSERT_TRUE(Encode(stub.get(), req, &cls).ok());
  req.mutable_pooling()->set_type(v1::POOLING_TYPE_MEAN);
  ASSERT_TRUE(Encode(stub.get(), req, &mean).ok());
  EXPECT_NEAR(Dot(by_default, cls), 1.0, 1e-6);
  EXPECT_LT(Dot(by_default, mean), 0.99);  // CLS and MEAN differ on this model
}

}  // namespace
}  // namespace rill::tests::integration
