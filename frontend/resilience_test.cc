// Engine down -> UNAVAILABLE with retry metadata and NOT_SERVING, recovery;
// forwarded unary RPCs; local tokenize; admin token checks.
#include <gtest/gtest.h>

#include "frontend/testing/frontend_fixture.h"

namespace rill::frontend::testing {
namespace {

using rill::v1::GenerateResponse;

class ResilienceTest : public FrontendFixture {};

TEST_F(ResilienceTest, EngineDownThenRecovery) {
  engine_->set_token_delay_ms(20);
  const int port = engine_->port();
  grpc::ClientContext ctx;
  auto stream = stub_->Generate(&ctx);
  stream->Write(Start("r1", "x", 100000));
  GenerateResponse r;
  ASSERT_TRUE(stream->Read(&r));
  engine_->Stop();
  auto all = ReadAll(stream.get(), {"r1"});
  EXPECT_EQ(all["r1"].back().status().code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(WaitHealth(false));
  {
    grpc::ClientContext c;
    rill::v1::CheckHealthResponse resp;
    EXPECT_EQ(stub_->CheckHealth(&c, {}, &resp).error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  stream->Write(Start("r2", "x", 3));
  all = ReadAll(stream.get(), {"r2"});
  EXPECT_EQ(all["r2"].back().status().code(), grpc::StatusCode::UNAVAILABLE);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  auto md = ctx.GetServerTrailingMetadata();
  EXPECT_EQ(md.count("grpc-retry-pushback-ms"), 1u);

  // A new engine on the same port: the frontend reconnects.
  engine_ = std::make_unique<FakeEngine>(*DefaultModelSpec());
  ASSERT_TRUE(engine_->Start(port).ok());
  engine_->set_script(Ids(" Hello world"));
  ASSERT_TRUE(WaitHealth(true, absl::Seconds(30)));
  grpc::ClientContext ctx2;
  auto s2 = stub_->Generate(&ctx2);
  s2->Write(Start("r3", "x", 2));
  s2->WritesDone();
  all = ReadAll(s2.get(), {"r3"});
  EXPECT_EQ(all["r3"].back().status().code(), 0);
  EXPECT_EQ(Text(all["r3"]), " Hello world");
  EXPECT_TRUE(s2->Finish().ok());
}

TEST_F(ResilienceTest, EngineNotHealthyMeansNotServing) {
  engine_->set_healthy(false);
  EXPECT_TRUE(WaitHealth(false));
  engine_->set_healthy(true);
  EXPECT_TRUE(WaitHealth(true));
}

TEST_F(ResilienceTest, UnaryRpcs) {
  {
    grpc::ClientContext c;
    rill::v1::ModelConfig mc;
    ASSERT_TRUE(stub_->GetModelConfig(&c, {}, &mc).ok());
    EXPECT_EQ(mc.vocab_size(), tok().vocab_size());
  }
  {
    grpc::ClientContext c;
    rill::v1::ServerConfig sc;
    ASSERT_TRUE(stub_->GetServerConfig(&c, {}, &sc).ok());
    EXPECT_EQ(sc.engine().backend(), "fake");
  }
  {
    grpc::ClientContext c;
    rill::v1::Load load;
    ASSERT_TRUE(stub_->GetLoad(&c, {}, &load).ok());
    EXPECT_EQ(load.frontend_id(), "fe7");
  }
  {
    grpc::ClientContext c;
    rill::v1::CheckHealthResponse h;
    ASSERT_TRUE(stub_->CheckHealth(&c, {}, &h).ok());
    EXPECT_TRUE(h.healthy());
  }
  {
    grpc::ClientContext c;
    rill::v1::EncodeRequest e;
    e.set_text("hi");
    rill::v1::EncodeResponse er;
    EXPECT_EQ(stub_->Encode(&c, e, &er).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  rill::v1::TokenizeResponse tr;
  {
    grpc::ClientContext c;
    rill::v1::TokenizeRequest t;
    t.set_text("Hello world");
    t.set_return_token_strings(true);
    ASSERT_TRUE(stub_->Tokenize(&c, t, &tr).ok());
    EXPECT_EQ(tr.count(), tr.token_ids_size());
    EXPECT_EQ(tr.tokens_size(), tr.token_ids_size());
    EXPECT_EQ(tr.max_model_len(), 2048);
  }
  {
    grpc::ClientContext c;
    rill::v1::DetokenizeRequest d;
    *d.mutable_token_ids() = tr.token_ids();
    rill::v1::DetokenizeResponse dr;
    ASSERT_TRUE(stub_->Detokenize(&c, d, &dr).ok());
    EXPECT_EQ(dr.text(), "Hello world");
  }
  {
    grpc::ClientContext c;
    rill::v1::DetokenizeRequest d;
    d.add_token_ids(-3);
    rill::v1::DetokenizeResponse dr;
    EXPECT_EQ(stub_->Detokenize(&c, d, &dr).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
}

TEST_F(ResilienceTest, AdminRequiresToken) {
  rill::v1::IsSleepingResponse resp;
  {
    grpc::ClientContext c;
    EXPECT_EQ(admin_->IsSleeping(&c, {}, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext c;
    c.AddMetadata("authorization", "Bearer wrong");
    EXPECT_EQ(admin_->IsSleeping(&c, {}, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    // Authorized: forwarded to the engine, which (fake) has no Admin service.
    grpc::ClientContext c;
    c.AddMetadata("authorization", std::string("Bearer ") + kToken);
    EXPECT_EQ(admin_->IsSleeping(&c, {}, &resp).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
}

}  // namespace
}  // namespace rill::frontend::testing
