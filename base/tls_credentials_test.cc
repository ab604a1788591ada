// MakeServerCredentials / MakeChannelCredentials with certificates made by
// openssl at test time: clear errors for bad files, and real TLS / mutual
// TLS connections on 127.0.0.1 (a health service stands in for any service).
#include "base/tls_credentials.h"

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/util/subprocess.h"
#include "tests/util/test_pki.h"

namespace rill::base {
namespace {

class TlsCredentialsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto pki = tests::util::MakeTestPki(tests::util::TestTempDir() + "/pki");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new tests::util::TestPki(*pki);
  }
  static void TearDownTestSuite() { delete pki_; }

  // Starts a server with `files`; returns its port.
  int Serve(const TlsFiles& files) {
    auto creds = MakeServerCredentials(files);
    EXPECT_TRUE(creds.ok()) << creds.status();
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", *creds, &port);
    server_ = builder.BuildAndStart();
    EXPECT_NE(server_, nullptr);
    return port;
  }

  // One health check over a fresh channel with `files`; the status code.
  grpc::StatusCode Check(int port, const TlsFiles& files) {
    auto creds = MakeChannelCredentials(files);
    EXPECT_TRUE(creds.ok()) << creds.status();
    if (!creds.ok()) return grpc::StatusCode::INTERNAL;
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), *creds, args);
    auto stub = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::health::v1::HealthCheckResponse resp;
    return stub->Check(&ctx, {}, &resp).error_code();
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }

  static tests::util::TestPki* pki_;
  std::unique_ptr<grpc::Server> server_;
};

tests::util::TestPki* TlsCredentialsTest::pki_ = nullptr;

TEST_F(TlsCredentialsTest, BadFilesAreNamedInTheError) {
  auto missing = MakeServerCredentials({pki_->server_cert, pki_->dir + "/nope.key", ""});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("nope.key"), std::string::npos) << missing.status();

  auto mismatched = MakeServerCredentials({pki_->server_cert, pki_->client_key, ""});
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.status().message().find("does not match"), std::string::npos)
      << mismatched.status();
  EXPECT_NE(mismatched.status().message().find(pki_->client_key), std::string::npos);

  auto not_pem = MakeServerCredentials({pki_->server_cert, pki_->server_key, pki_->dir + "/server.ext"});
  EXPECT_FALSE(not_pem.ok());

  auto client_mismatch = MakeChannelCredentials({pki_->client_cert, pki_->server_key, pki_->ca_cert});
  ASSERT_FALSE(client_mismatch.ok());
  EXPECT_NE(client_mismatch.status().message().find("does not match"), std::string::npos);

  auto no_ca = MakeChannelCredentials({pki_->client_cert, pki_->client_key, ""});
  EXPECT_FALSE(no_ca.ok());
}

TEST_F(TlsCredentialsTest, TlsServerAcceptsVerifiedTlsClientsOnly) {
  const int port = Serve({pki_->server_cert, pki_->server_key, ""});
  EXPECT_EQ(Check(port, {"", "", pki_->ca_cert}), grpc::StatusCode::OK);
  EXPECT_EQ(Check(port, {}), grpc::StatusCode::UNAVAILABLE);  // Plaintext client.
  // A CA that did not sign the server's certificate.
  EXPECT_EQ(Check(port, {"", "", pki_->dir + "/rogue-ca.pem"}), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsCredentialsTest, MutualTlsRequiresAClientCertificateFromTheCa) {
  const int port = Serve({pki_->server_cert, pki_->server_key, pki_->ca_cert});
  EXPECT_EQ(Check(port, {pki_->client_cert, pki_->client_key, pki_->ca_cert}),
            grpc::StatusCode::OK);
  EXPECT_EQ(Check(port, {"", "", pki_->ca_cert}), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Check(port, {pki_->rogue_cert, pki_->rogue_key, pki_->ca_cert}),
            grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace rill::base
