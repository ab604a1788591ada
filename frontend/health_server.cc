#include "frontend/health_server.h"

#include <glog/logging.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rill::frontend {

HealthServer::~HealthServer() { Shutdown(); }

absl::Status HealthServer::Start() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address_, grpc::InsecureServerCredentials(), &port_);
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

void HealthServer::SetServing(const std::string& service, bool serving) {
  if (server_ == nullptr) return;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  if (service.empty()) {
    health->SetServingStatus(serving);
  } else {
    health->SetServingStatus(service, serving);
  }
}

void HealthServer::Shutdown() {
  if (server_ != nullptr) {
    server_->Shutdown();
  }
}

void HealthServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace rill::frontend
