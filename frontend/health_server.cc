#include "frontend/health_server.h"

#include <glog/logging.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/ext/health_check_service_server_builder_option.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rill::frontend {

HealthServer::~HealthServer() { Shutdown(); }

absl::Status HealthServer::Start() {
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Rill's own grpc.health.v1 (base/health_service.h) replaces gRPC's.
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  builder.RegisterService(&health_);
  builder.AddListeningPort(
      address_, credentials_ != nullptr ? credentials_ : grpc::InsecureServerCredentials(), &port_);
  builder.SetMaxReceiveMessageSize(transport_.max_receive_bytes);
  builder.SetMaxSendMessageSize(transport_.max_send_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             absl::ToInt64Milliseconds(transport_.keepalive_time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             absl::ToInt64Milliseconds(transport_.keepalive_timeout));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, transport_.reuse_port ? 1 : 0);
  // Clients may ping as often as every 10 s without being sent GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  for (grpc::Service* service : services_) builder.RegisterService(service);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address_,
                                               " (address in use or invalid?)"));
  }
  LOG(INFO) << "listening on " << address_ << " (port " << port_ << ")";
  return absl::OkStatus();
}

void HealthServer::Shutdown(absl::Duration grace) {
  // NOT_SERVING to watchers, and their streams end: they must not hold the
  // shutdown until `grace`.
  health_.Shutdown();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(absl::ToInt64Milliseconds(grace)));
  }
}

void HealthServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace rill::frontend
