// Client-facing TLS / mutual TLS on rill-frontend and mutual TLS between
// frontend and engine, with real processes on 127.0.0.1 and certificates
// made by openssl at test time (tests/util/test_pki.h); plus the start-up
// errors of bad certificate files and the TLS flags of `rill serve`.
#include <signal.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rill/v1/inference.grpc.pb.h"
#include "tests/integration/service_stack.h"
#include "tests/util/subprocess.h"
#include "tests/util/test_pki.h"

namespace rill::tests::integration {
namespace {

class TlsE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto pki = util::MakeTestPki(util::TestTempDir() + "/pki");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new util::TestPki(*pki);
  }
  static void TearDownTestSuite() { delete pki_; }

  // A short greedy completion on `channel`: its status (and text).
  static absl::StatusOr<Collected> Complete(const std::shared_ptr<grpc::Channel>& channel,
                                            const std::string& id) {
    auto stub = v1::Inference::NewStub(channel);
    return GenerateOnce(stub.get(), GreedyText("The capital of France is", 4, id),
                        absl::Seconds(120));
  }

  static grpc::StatusCode CheckHealth(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = v1::Inference::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    v1::CheckHealthResponse resp;
    return stub->CheckHealth(&ctx, {}, &resp).error_code();
  }

  // Runs `argv` to its exit (a failing start-up must not hang); returns the
  // exit code and fills `log`.
  static int RunToExit(const std::vector<std::string>& argv, const std::string& name,
                       std::string* log) {
    const std::string log_path = absl::StrCat(util::TestTempDir(), "/", name, ".log");
    util::Subprocess p;
    EXPECT_TRUE(p.Start(argv, log_path).ok());
    absl::StatusOr<int> code = p.Wait(absl::Seconds(60));
    EXPECT_TRUE(code.ok()) << name << " did not exit: " << code.status();
    std::ifstream in(log_path);
    std::stringstream ss;
    ss << in.rdbuf();
    *log = ss.str();
    return code.ok() ? *code : -1;
  }

  static util::TestPki* pki_;
};

util::TestPki* TlsE2eTest::pki_ = nullptr;

TEST_F(TlsE2eTest, TlsClientsGenerateAndPlaintextClientsAreRefused) {
  ServiceStack stack;
  StackOptions opts;
  opts.frontend_flags = {"--tls_cert=" + pki_->server_cert, "--tls_key=" + pki_->server_key};
  opts.client_tls = {"", "", pki_->ca_cert};
  absl::Status started = stack.Start(opts);  // Waits for SERVING over TLS.
  ASSERT_TRUE(started.ok()) << started;

  auto tls = stack.NewChannel(1);
  absl::StatusOr<Collected> c = Complete(tls, "tls-1");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status.code(), 0) << c->status.message();
  EXPECT_EQ(c->token_ids.size(), 4u);
  EXPECT_EQ(c->finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(CheckHealth(tls), grpc::StatusCode::OK);
  EXPECT_TRUE(IsServing(tls).value_or(false));

  auto plaintext = stack.NewChannel(2, {});
  EXPECT_EQ(CheckHealth(plaintext), grpc::StatusCode::UNAVAILABLE);
  absl::StatusOr<Collected> refused = Complete(plaintext, "plain-1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
}

TEST_F(TlsE2eTest, MutualTlsToClientsAndToTheEngine) {
  ServiceStack stack;
  StackOptions opts;
  // The engine accepts only frontends with a certificate from the CA; the
  // frontend presents the server certificate (it allows clientAuth), as
  // `rill serve` does with one shared certificate.
  opts.engine_flags = {"--tls_cert=" + pki_->server_cert, "--tls_key=" + pki_->server_key,
                       "--tls_client_ca=" + pki_->ca_cert};
  opts.frontend_flags = {"--tls_cert=" + pki_->server_cert,
                         "--tls_key=" + pki_->server_key,
                         "--tls_client_ca=" + pki_->ca_cert,
                         "--engine_tls_ca=" + pki_->ca_cert,
                         "--engine_tls_cert=" + pki_->server_cert,
                         "--engine_tls_key=" + pki_->server_key,
                         "--engine_tls_server_name=localhost"};
  opts.client_tls = {pki_->client_cert, pki_->client_key, pki_->ca_cert};
  absl::Status started = stack.Start(opts);
  ASSERT_TRUE(started.ok()) << started;

  // Frontend -> engine over mutual TLS carries a whole completion.
  auto good = stack.NewChannel(1);
  absl::StatusOr<Collected> c = Complete(good, "mtls-1");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status.code(), 0) << c->status.message();
  EXPECT_EQ(c->token_ids.size(), 4u);
  EXPECT_EQ(CheckHealth(good), grpc::StatusCode::OK);

  // No client certificate, or one from another CA: the handshake fails.
  EXPECT_EQ(CheckHealth(stack.NewChannel(2, {"", "", pki_->ca_cert})),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(CheckHealth(stack.NewChannel(3, {pki_->rogue_cert, pki_->rogue_key, pki_->ca_cert})),
            grpc::StatusCode::UNAVAILABLE);
  absl::StatusOr<Collected> refused =
      Complete(stack.NewChannel(4, {"", "", pki_->ca_cert}), "nocert-1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);

  // The engine refuses a plaintext client (e.g. a frontend without
  // --engine_tls_*) too.
  auto engine_plain = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(stack.engine_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  grpc::health::v1::HealthCheckResponse resp;
  EXPECT_EQ(engine_plain->Check(&ctx, {}, &resp).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsE2eTest, BadCertificateFilesStopTheBinariesWithTheFileName) {
  const std::string missing = pki_->dir + "/missing.key";
  std::string log;
  // Nothing listens on the engine port: the frontend must fail on the file
  // before it starts waiting for the engine.
  int code =
      RunToExit({util::RunfilePath("frontend/rill-frontend"), "--port=0", "--engine=127.0.0.1:1",
                 "--engine_wait_s=60", "--tls_cert=" + pki_->server_cert, "--tls_key=" + missing},
                "frontend-missing-key", &log);
  EXPECT_NE(code, 0);
  EXPECT_NE(log.find(missing), std::string::npos) << log;

  code = RunToExit(
      {util::RunfilePath("frontend/rill-frontend"), "--port=0", "--engine=127.0.0.1:1",
       "--engine_wait_s=60", "--tls_cert=" + pki_->server_cert, "--tls_key=" + pki_->client_key},
      "frontend-mismatched-key", &log);
  EXPECT_NE(code, 0);
  EXPECT_NE(log.find("does not match"), std::string::npos) << log;
  EXPECT_NE(log.find(pki_->client_key), std::string::npos) << log;

  code = RunToExit({util::RunfilePath("frontend/rill-frontend"), "--port=0", "--engine=127.0.0.1:1",
                    "--engine_wait_s=60", "--engine_tls_ca=" + pki_->dir + "/missing-ca.pem"},
                   "frontend-missing-engine-ca", &log);
  EXPECT_NE(code, 0);
  EXPECT_NE(log.find("missing-ca.pem"), std::string::npos) << log;

  code = RunToExit({util::RunfilePath("engine/service/rill-engine"), "--port=0",
                    "--tls_cert=" + pki_->server_cert, "--tls_key=" + missing},
                   "engine-missing-key", &log);
  EXPECT_NE(code, 0);
  EXPECT_NE(log.find(missing), std::string::npos) << log;

  code = RunToExit(
      {util::RunfilePath("cli/rill"), "serve", "--port=0",
       "--run_dir=" + util::TestTempDir() + "/serve-bad", "--tls_cert=" + pki_->server_cert,
       "--tls_key=" + missing, "--engine_binary=" + util::RunfilePath("engine/service/rill-engine"),
       "--frontend_binary=" + util::RunfilePath("frontend/rill-frontend")},
      "serve-missing-key", &log);
  EXPECT_NE(code, 0);
  EXPECT_NE(log.find(missing), std::string::npos) << log;

  // Frontend<->engine TLS under `rill serve` is all three files or none.
  code =
      RunToExit({util::RunfilePath("cli/rill"), "serve", "--port=0",
                 "--run_dir=" + util::TestTempDir() + "/serve-partial",
                 "--engine_tls_cert=" + pki_->server_cert, "--engine_tls_key=" + pki_->server_key,
                 "--engine_binary=" + util::RunfilePath("engine/service/rill-engine"),
                 "--frontend_binary=" + util::RunfilePath("frontend/rill-frontend")},
                "serve-partial-engine-tls", &log);
  EXPECT_EQ(code, 2);
  EXPECT_NE(log.find("--engine_tls_ca"), std::string::npos) << log;
}

TEST_F(TlsE2eTest, RillServePassesTheTlsFlagsThrough) {
  const std::string dir = util::TestTempDir() + "/serve-tls";
  const std::string ready = dir + "/ready";
  util::Subprocess serve;
  ASSERT_TRUE(
      serve
          .Start({util::RunfilePath("cli/rill"), "serve", "--port=0", "--threads=2",
                  "--ready_file=" + ready, "--log_to_files", "--run_dir=" + dir,
                  "--tls_cert=" + pki_->server_cert, "--tls_key=" + pki_->server_key,
                  "--tls_client_ca=" + pki_->ca_cert, "--engine_tls_cert=" + pki_->server_cert,
                  "--engine_tls_key=" + pki_->server_key, "--engine_tls_ca=" + pki_->ca_cert,
                  "--engine_binary=" + util::RunfilePath("engine/service/rill-engine"),
                  "--frontend_binary=" + util::RunfilePath("frontend/rill-frontend")},
                 absl::StrCat(util::TestTempDir(), "/serve-tls.log"))
          .ok());
  absl::StatusOr<std::string> address = util::WaitForFile(ready, absl::Seconds(180), &serve);
  ASSERT_TRUE(address.ok()) << address.status();
  const std::string addr(absl::StripAsciiWhitespace(*address));

  auto creds = base::MakeChannelCredentials({pki_->client_cert, pki_->client_key, pki_->ca_cert});
  ASSERT_TRUE(creds.ok()) << creds.status();
  auto channel = grpc::CreateChannel(addr, *creds);
  // The frontend may still be connecting its engine stream when the engine
  // reports ready: wait for the frontend's own health.
  ASSERT_TRUE(WaitForHealth(channel, true, absl::Seconds(60)).ok());
  absl::StatusOr<Collected> c = Complete(channel, "serve-tls-1");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->status.code(), 0) << c->status.message();
  EXPECT_EQ(c->token_ids.size(), 4u);
  EXPECT_EQ(CheckHealth(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials())),
            grpc::StatusCode::UNAVAILABLE);
  absl::StatusOr<int> code = serve.Stop(SIGTERM, absl::Seconds(60));
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace rill::tests::integration
