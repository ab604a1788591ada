// The rill-engine binary as a separate process: health while loading, the
// waiting-queue limit, and SIGTERM mid-request (finish_reason abort, exit 0).
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rill/internal/engine.grpc.pb.h"
#include "tests/util/subprocess.h"

namespace rill::service {
namespace {

using rill::internal::EngineOutput;
using rill::internal::EngineRequest;
using Stream = grpc::ClientReaderWriter<EngineRequest, EngineOutput>;

class EngineProcessTest : public ::testing::Test {
 protected:
  void StartEngine(std::vector<std::string> extra) {
    const std::string dir = testing::TestTempDir();
    // Unique per test: a stale file from an earlier test would name a dead port.
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    const std::string port_file = absl::StrCat(dir, "/engine_port_", name);
    std::remove(port_file.c_str());
    std::vector<std::string> argv = {testing::RunfilePath("engine/service/rill-engine"),
                                     "--host=127.0.0.1", "--port=0",
                                     "--port_file=" + port_file, "--model=default",
                                     "--threads=2", "--max_model_len=512"};
    for (std::string& f : extra) argv.push_back(std::move(f));
    ASSERT_TRUE(child_.Start(argv, absl::StrCat(dir, "/engine_", name, ".log")).ok());
    absl::StatusOr<std::string> port = testing::WaitForFile(port_file, absl::Seconds(60), &child_);
    ASSERT_TRUE(port.ok()) << port.status();
    int p = 0;
    ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(*port), &p));
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", p),
                                       grpc::InsecureChannelCredentials());
    engine_ = rill::internal::Engine::NewStub(channel);
    health_ = grpc::health::v1::Health::NewStub(channel);
  }

  grpc::health::v1::HealthCheckResponse::ServingStatus Health() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    if (!health_->Check(&ctx, req, &resp).ok()) return grpc::health::v1::HealthCheckResponse::UNKNOWN;
    return resp.status();
  }

  void WaitServing() {
    for (int i = 0; i < 1200 && Health() != grpc::health::v1::HealthCheckResponse::SERVING; ++i) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    ASSERT_EQ(Health(), grpc::health::v1::HealthCheckResponse::SERVING);
  }

  static EngineRequest Start(const std::string& id, int max_tokens) {
    EngineRequest r;
    r.mutable_start()->set_request_id(id);
    for (int32_t t : {1, 504, 3458, 282, 4649}) r.mutable_start()->add_prompt_token_ids(t);
    r.mutable_start()->mutable_sampling()->set_temperature(0);
    r.mutable_start()->mutable_sampling()->set_max_tokens(max_tokens);
    r.mutable_start()->mutable_sampling()->set_ignore_eos(true);
    return r;
  }

  testing::Subprocess child_;
  std::unique_ptr<rill::internal::Engine::Stub> engine_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

TEST_F(EngineProcessTest, NotServingWhileLoadingThenSigtermAbortsAndExitsZero) {
  StartEngine({"--debug_load_delay_s=3"});
  // The server answers before the model is loaded.
  EXPECT_EQ(Health(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  {
    grpc::ClientContext ctx;
    std::unique_ptr<Stream> stream = engine_->Generate(&ctx);
    ASSERT_TRUE(stream->Write(Start("early", 4)));
    EngineOutput out;
    ASSERT_TRUE(stream->Read(&out));
    EXPECT_EQ(out.status().code(), static_cast<int>(grpc::StatusCode::UNAVAILABLE));
    EXPECT_NE(out.status().message().find("loading"), std::string::npos) << out.status().message();
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  WaitServing();

  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream = engine_->Generate(&ctx);
  ASSERT_TRUE(stream->Write(Start("long", 400)));
  EngineOutput out;
  ASSERT_TRUE(stream->Read(&out));  // It is running.
  child_.SignalGroup(SIGTERM);
  rill::v1::FinishReason finish = rill::v1::FINISH_REASON_UNSPECIFIED;
  int tokens = 0;
  do {
    for (const auto& c : out.outputs()) {
      tokens += c.token_ids_size();
      if (c.finish_reason() != rill::v1::FINISH_REASON_UNSPECIFIED) finish = c.finish_reason();
    }
  } while (!out.finished() && stream->Read(&out));
  EXPECT_TRUE(out.finished());
  EXPECT_EQ(finish, rill::v1::FINISH_REASON_ABORT);
  EXPECT_LT(tokens, 400);
  (void)stream->Finish();
  absl::StatusOr<int> code = child_.Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

TEST_F(EngineProcessTest, QueueLimitGivesResourceExhausted) {
  StartEngine({"--max_num_seqs=1", "--max_waiting_requests=1"});
  WaitServing();
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream = engine_->Generate(&ctx);
  ASSERT_TRUE(stream->Write(Start("r1", 300)));
  EngineOutput out;
  ASSERT_TRUE(stream->Read(&out));  // r1 runs; r2 must wait behind it.
  ASSERT_TRUE(stream->Write(Start("r2", 4)));
  for (int i = 0; i < 600; ++i) {
    grpc::ClientContext lctx;
    rill::v1::Load load;
    ASSERT_TRUE(engine_->GetLoad(&lctx, rill::v1::GetLoadRequest(), &load).ok());
    if (load.num_waiting_requests() >= 1) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(stream->Write(Start("r3", 4)));
  int r3_code = -1;
  while (stream->Read(&out)) {
    if (out.request_id() == "r3" && out.finished()) {
      r3_code = out.status().code();
      break;
    }
  }
  EXPECT_EQ(r3_code, static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
  ctx.TryCancel();
  (void)stream->Finish();
  absl::StatusOr<int> code = child_.Stop(SIGTERM, absl::Seconds(30));
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace rill::service
