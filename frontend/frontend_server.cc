#include "frontend/frontend_server.h"

#include "absl/strings/str_cat.h"

namespace rill::frontend {

absl::Status FrontendServer::Start() {
  if (options_.engine_address.empty()) return absl::InvalidArgumentError("--engine is required");
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> server_creds =
      base::MakeServerCredentials(options_.server_tls);
  if (!server_creds.ok()) return server_creds.status();
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> engine_creds =
      base::MakeChannelCredentials(options_.engine_tls);
  if (!engine_creds.ok()) {
    return absl::Status(engine_creds.status().code(),
                        absl::StrCat("engine channel: ", engine_creds.status().message()));
  }
  engine_ = std::make_unique<EngineClient>(options_.engine_address, options_.frontend_id,
                                           options_.engine_transport, *engine_creds,
                                           options_.engine_tls_server_name, options_.engine_secret);
  if (absl::Status s = engine_->Start(options_.engine_wait); !s.ok()) return s;
  inference_ = std::make_unique<InferenceService>(engine_.get(), options_.session);
  server_ = std::make_unique<HealthServer>(absl::StrCat(options_.host, ":", options_.port),
                                           options_.server_transport, *server_creds);
  server_->AddService(inference_.get());
  if (!options_.admin_token.empty()) {
    admin_ = std::make_unique<AdminService>(options_.admin_token, engine_->channel());
    server_->AddService(admin_.get());
  }
  if (absl::Status s = server_->Start(); !s.ok()) return s;
  const bool with_admin = admin_ != nullptr;
  HealthServer* server = server_.get();
  engine_->SetServingCallback([server, with_admin](bool serving) {
    server->SetServing("", serving);
    server->SetServing("rill.v1.Inference", serving);
    if (with_admin) server->SetServing("rill.v1.Admin", serving);
  });
  return absl::OkStatus();
}

void FrontendServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (engine_) engine_->SetServingCallback(nullptr);
  if (server_) {
    server_->SetServing("", false);
    server_->SetServing("rill.v1.Inference", false);
    // grpc::Server::Shutdown stops accepting at once and blocks until calls
    // end; the extra second lets the ABORT responses reach clients before
    // streams still open are cancelled.
    std::thread stop([this, grace] { server_->Shutdown(grace + absl::Seconds(1)); });
    if (inference_) inference_->Drain(grace);
    stop.join();
  }
  if (engine_) engine_->Shutdown();
}

void FrontendServer::Wait() {
  if (server_) server_->Wait();
}

}  // namespace rill::frontend
