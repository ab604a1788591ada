#include "frontend/testing/frontend_fixture.h"

#include <set>

#include "grpc/health/v1/health.grpc.pb.h"

namespace rill::frontend::testing {

void FrontendFixture::SetUp() {
  absl::StatusOr<rill::internal::TokenizerSpec> spec = DefaultModelSpec();
  if (!spec.ok()) GTEST_SKIP() << spec.status();
  CustomizeSpec(&*spec);
  engine_ = std::make_unique<FakeEngine>(*spec);
  ASSERT_TRUE(engine_->Start().ok());
  FrontendOptions opts;
  opts.port = 0;
  opts.engine_address = engine_->address();
  opts.frontend_id = "fe7";
  opts.admin_token = kToken;
  opts.engine_wait = absl::Seconds(30);
  Customize(&opts);
  frontend_ = std::make_unique<FrontendServer>(opts);
  absl::Status s = frontend_->Start();
  ASSERT_TRUE(s.ok()) << s;
  engine_->set_script(Ids(" Hello world, this is a test of the frontend. Bonjour à tous!"));
  channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(frontend_->port()),
                                 grpc::InsecureChannelCredentials());
  stub_ = rill::v1::Inference::NewStub(channel_);
  admin_ = rill::v1::Admin::NewStub(channel_);
  ASSERT_TRUE(WaitHealth(true));
}

void FrontendFixture::TearDown() {
  if (frontend_) frontend_->Shutdown();
  frontend_.reset();
  if (engine_) engine_->Stop();
}

std::string FrontendFixture::Decode(const std::vector<int32_t>& ids) {
  auto s = tok().Decode(ids, true);
  return s.ok() ? *s : "<decode error>";
}

rill::v1::GenerateRequest FrontendFixture::Start(const std::string& id, const std::string& text,
                                                 int max_tokens) {
  rill::v1::GenerateRequest r;
  r.mutable_start()->set_request_id(id);
  r.mutable_start()->set_text(text);
  r.mutable_start()->mutable_sampling()->set_max_tokens(max_tokens);
  return r;
}

rill::v1::GenerateRequest FrontendFixture::AbortMsg(const std::string& id) {
  rill::v1::GenerateRequest r;
  r.mutable_abort()->set_request_id(id);
  return r;
}

std::map<std::string, std::vector<rill::v1::GenerateResponse>> FrontendFixture::ReadAll(
    GenStream* stream, const std::vector<std::string>& ids) {
  std::map<std::string, std::vector<rill::v1::GenerateResponse>> out;
  std::set<std::string> open(ids.begin(), ids.end());
  rill::v1::GenerateResponse r;
  while (!open.empty() && stream->Read(&r)) {
    out[r.request_id()].push_back(r);
    if (r.finished()) open.erase(r.request_id());
  }
  return out;
}

std::string FrontendFixture::Text(const std::vector<rill::v1::GenerateResponse>& rs) {
  std::string s;
  for (const auto& r : rs) {
    for (const auto& c : r.outputs()) {
      if (c.index() == 0) s += c.text();
    }
  }
  return s;
}

bool FrontendFixture::WaitHealth(bool serving, absl::Duration timeout) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status s = health->Check(&ctx, req, &resp);
    bool is = s.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
    if (is == serving) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

}  // namespace rill::frontend::testing
