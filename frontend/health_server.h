// The gRPC server shell every Rill frontend runs: standard grpc.health.v1
// health checking and server reflection on a TCP address. Services register
// on it before Start().
#ifndef RILL_FRONTEND_HEALTH_SERVER_H_
#define RILL_FRONTEND_HEALTH_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "base/health_service.h"
#include "frontend/session_options.h"

namespace rill::frontend {

// Owns a grpc::Server. Start() and Shutdown() may be called from any one
// thread; Wait() blocks the caller until Shutdown().
class HealthServer {
 public:
  // `address` is host:port; port 0 lets the kernel choose (see port()).
  // `credentials` null: plaintext (see base/tls_credentials.h for TLS).
  explicit HealthServer(std::string address, GrpcTransportOptions transport = {},
                        std::shared_ptr<grpc::ServerCredentials> credentials = nullptr)
      : address_(std::move(address)),
        transport_(transport),
        credentials_(std::move(credentials)) {}
  ~HealthServer();

  // Services must outlive the server.
  void AddService(grpc::Service* service) { services_.push_back(service); }

  absl::Status Start();
  int port() const { return port_; }

  // Overall ("") and per-service health; NOT_SERVING until set otherwise.
  // Watch callers hear only of changes.
  void SetServing(const std::string& service, bool serving) { health_.Set(service, serving); }

  // Stops accepting calls; in-flight calls get until `grace`, then are
  // cancelled. Blocks until they are done.
  void Shutdown(absl::Duration grace = absl::ZeroDuration());
  void Wait();

 private:
  std::string address_;
  GrpcTransportOptions transport_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  std::vector<grpc::Service*> services_;
  base::HealthService health_;  // Outlives server_ (declared before it).
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_HEALTH_SERVER_H_
