// Proves the gRPC toolchain end to end: a Bazel-built rill-frontend process
// serves grpc.health.v1 on 127.0.0.1 and this separate test process talks to it.
#include <signal.h>

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/util/subprocess.h"

namespace rill::tests::integration {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthRoundTripTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The frontend needs an engine before it listens: a fake one (its own
    // process) serving the default model's tokenizer.
    const std::string engine_port_file = absl::StrCat(util::TestTempDir(), "/engine.port");
    std::remove(engine_port_file.c_str());
    ASSERT_TRUE(engine_
                    .Start({util::RunfilePath("frontend/fake_engine_main"), "--port=0",
                            "--port_file=" + engine_port_file},
                           absl::StrCat(util::TestTempDir(), "/engine.log"))
                    .ok());
    absl::StatusOr<std::string> engine_port =
        util::WaitForFile(engine_port_file, absl::Seconds(60), &engine_);
    ASSERT_TRUE(engine_port.ok()) << engine_port.status();
    port_file_ = absl::StrCat(util::TestTempDir(), "/frontend.port");
    std::remove(port_file_.c_str());
    ASSERT_TRUE(server_
                    .Start({util::RunfilePath("frontend/rill-frontend"), "--port=0",
                            "--port_file=" + port_file_,
                            absl::StrCat("--engine=127.0.0.1:",
                                         std::string(absl::StripAsciiWhitespace(*engine_port)))},
                           absl::StrCat(util::TestTempDir(), "/frontend.log"))
                    .ok());
    absl::StatusOr<std::string> port = util::WaitForFile(port_file_, absl::Seconds(60), &server_);
    ASSERT_TRUE(port.ok()) << port.status();
    ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(*port), &port_));
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                   grpc::InsecureChannelCredentials());
  }

  std::string port_file_;
  util::Subprocess engine_;
  util::Subprocess server_;
  int port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(HealthRoundTripTest, OverallHealthIsServing) {
  std::unique_ptr<Health::Stub> stub = Health::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckRequest request;
  HealthCheckResponse response;
  // SERVING once the engine stream is up (polled: it comes up just after
  // the port opens).
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  grpc::Status status;
  do {
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    status = stub->Check(&c, request, &response);
    if (status.ok() && response.status() == HealthCheckResponse::SERVING) break;
    absl::SleepFor(absl::Milliseconds(100));
  } while (absl::Now() < deadline);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
}

TEST_F(HealthRoundTripTest, UnknownServiceIsNotFound) {
  std::unique_ptr<Health::Stub> stub = Health::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckRequest request;
  request.set_service("no.such.Service");
  HealthCheckResponse response;
  grpc::Status status = stub->Check(&ctx, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(HealthRoundTripTest, SigtermShutsDownCleanly) {
  absl::StatusOr<int> code = server_.Stop(SIGTERM, absl::Seconds(20));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace rill::tests::integration
