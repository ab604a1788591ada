// Test fixture: a FakeEngine and a FrontendServer on 127.0.0.1, a client
// stub to the frontend, and helpers to drive Generate streams.
#ifndef RILL_FRONTEND_TESTING_FRONTEND_FIXTURE_H_
#define RILL_FRONTEND_TESTING_FRONTEND_FIXTURE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "frontend/frontend_server.h"
#include "frontend/testing/fake_engine.h"
#include "rill/v1/admin.grpc.pb.h"
#include "rill/v1/inference.grpc.pb.h"

namespace rill::frontend::testing {

using GenStream = grpc::ClientReaderWriter<rill::v1::GenerateRequest, rill::v1::GenerateResponse>;

class FrontendFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  // Lets a test change the frontend's options before it starts.
  virtual void Customize(FrontendOptions* opts) {}
  // Lets a test change the model's tokenizer (e.g. its chat template) before
  // the fake engine serves it.
  virtual void CustomizeSpec(rill::internal::TokenizerSpec* spec) {}
  void TearDown() override;

  const tokenizer::Tokenizer& tok() { return frontend_->engine()->tokenizer(); }
  std::vector<int32_t> Ids(const std::string& text) { return tok().Encode(text, false); }
  std::string Decode(const std::vector<int32_t>& ids);

  static rill::v1::GenerateRequest Start(const std::string& id, const std::string& text,
                                         int max_tokens);
  static rill::v1::GenerateRequest AbortMsg(const std::string& id);

  // Reads until every id in `ids` got its finished response (or the stream
  // ends); responses grouped by request id.
  std::map<std::string, std::vector<rill::v1::GenerateResponse>> ReadAll(
      GenStream* stream, const std::vector<std::string>& ids);
  // Concatenated DELTA text of completion 0.
  static std::string Text(const std::vector<rill::v1::GenerateResponse>& rs);

  // Polls the frontend's grpc health until it is (not) SERVING.
  bool WaitHealth(bool serving, absl::Duration timeout = absl::Seconds(20));

  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<FrontendServer> frontend_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rill::v1::Inference::Stub> stub_;
  std::unique_ptr<rill::v1::Admin::Stub> admin_;
  static constexpr char kToken[] = "s3cret";
};

}  // namespace rill::frontend::testing

#endif  // RILL_FRONTEND_TESTING_FRONTEND_FIXTURE_H_
