#include "engine/service/engine_server.h"

#include <glog/logging.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>

#include <algorithm>
#include <grpcpp/ext/health_check_service_server_builder_option.h>

#include "absl/strings/str_cat.h"

#include "absl/time/clock.h"

namespace rill::engine::service {
namespace {

// Linking grpc++_reflection registers its plugin for every server of the
// process; this option takes it off the engine's.
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                                    return dynamic_cast<grpc::reflection::ProtoServerReflectionPlugin*>(
                                               p.get()) != nullptr;
                                  }),
                   plugins->end());
  }
};

}  // namespace

EngineServer::EngineServer(EngineHost* host, std::string address, std::string profile_dir,
                           EngineAuth auth, std::shared_ptr<grpc::ServerCredentials> credentials)
    : host_(host),
      engine_service_(host, auth.engine_secret),
      vllm_service_(host, auth.vllm_api_without_credentials ? "" : auth.engine_secret,
                    profile_dir),
      admin_service_(host, std::move(profile_dir), auth.admin_token),
      serve_admin_(!auth.admin_token.empty()),
      address_(std::move(address)),
      credentials_(credentials ? std::move(credentials) : grpc::InsecureServerCredentials()) {}

EngineServer::~EngineServer() { Shutdown(absl::ZeroDuration()); }

absl::Status EngineServer::Start() {
  grpc::ServerBuilder builder;
  // Rill's own grpc.health.v1 (base/health_service.h) replaces gRPC's.
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  builder.RegisterService(&health_);
  builder.AddListeningPort(address_, credentials_, &port_);
  // gRPC's default SO_REUSEPORT would let another process of this user
  // listen on the engine's port too and take some of its connections.
  // (It also made gRPC 1.51 open a second listener per core, which on
  // --port=0 got a port of its own serving the same services.)
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetOption(std::make_unique<WithoutReflection>());
  builder.RegisterService(&engine_service_);
  builder.RegisterService(&vllm_service_);
  if (serve_admin_) builder.RegisterService(&admin_service_);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", address_, " (address in use or invalid?)"));
  }
  LOG(INFO) << "listening on " << address_ << " (port " << port_ << ")";
  SetServing(false);
  started_ = true;
  poller_ = std::thread([this] { PollHealth(); });
  return absl::OkStatus();
}

void EngineServer::PollHealth() {
  bool last = false;
  bool first = true;
  bool last_dead = false;
  bool first_liveness = true;
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    mu_.Unlock();
    const absl::Status serving = host_->Serving();
    const bool dead = host_->engine() != nullptr && !host_->engine()->DeadError().ok();
    mu_.Lock();
    if (stop_) break;
    if (first || serving.ok() != last) {
      SetServing(serving.ok());
      LOG(INFO) << "health: " << (serving.ok() ? "SERVING" : "NOT_SERVING")
                << (serving.ok() ? "" : " (") << serving.message()
                << (serving.ok() ? "" : ")");
      last = serving.ok();
      first = false;
    }
    if (first_liveness || dead != last_dead) {
      // A sleeping or loading engine is alive; only a dead one is not.
      health_.Set(kLivenessHealthService, !dead);
      last_dead = dead;
      first_liveness = false;
    }
    if (dead && dead_since_ == absl::InfiniteFuture()) dead_since_ = absl::Now();
    if (!dead) dead_since_ = absl::InfiniteFuture();
    mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(100));
  }
}

void EngineServer::SetServing(bool serving) {
  health_.Set("", serving);
  health_.Set("rill.internal.Engine", serving);
  health_.Set("vllm.grpc.engine.VllmEngine", serving);
}

absl::Duration EngineServer::DeadFor() const {
  absl::MutexLock lock(&mu_);
  if (dead_since_ == absl::InfiniteFuture()) return absl::ZeroDuration();
  return absl::Now() - dead_since_;
}

void EngineServer::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  if (poller_.joinable()) poller_.join();
  // NOT_SERVING to watchers, and their streams end (not held to `grace`).
  health_.Shutdown();
  if (!started_) return;
  // Calls still open after `grace` (idle Generate streams) are cancelled.
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(absl::ToInt64Milliseconds(grace)));
}

}  // namespace rill::engine::service
