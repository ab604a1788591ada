// Everything one rill-frontend process serves, wired together: the engine
// client, rill.v1.Inference, rill.v1.Admin (with a token), health and
// reflection. Used by rill-frontend's main and by the tests.
#ifndef RILL_FRONTEND_FRONTEND_SERVER_H_
#define RILL_FRONTEND_FRONTEND_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/tls_credentials.h"
#include "frontend/admin_service.h"
#include "frontend/engine_client.h"
#include "frontend/health_server.h"
#include "frontend/inference_service.h"

namespace rill::frontend {

struct FrontendOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string engine_address;
  std::string frontend_id = "0";
  std::string admin_token;  // Empty: no Admin service.
  absl::Duration engine_wait = absl::Seconds(120);
  SessionOptions session;
  GrpcTransportOptions server_transport;  // The client-facing server.
  GrpcTransportOptions engine_transport = EngineClient::DefaultEngineTransport();
  // Client-facing listener: plaintext, TLS (cert + key) or mutual TLS (+ ca).
  base::TlsFiles server_tls;
  // Channel to the engine: plaintext, TLS (ca verifies the engine) or mutual
  // TLS (+ cert and key, for an engine started with --tls_client_ca).
  base::TlsFiles engine_tls;
  std::string engine_tls_server_name;  // Empty: the host of engine_address.
  // Sent on every engine call (`rill-engine-secret`); empty only for an
  // engine that authenticates frontends by certificate (mutual TLS).
  std::string engine_secret;
};

class FrontendServer {
 public:
  explicit FrontendServer(FrontendOptions options) : options_(std::move(options)) {}
  ~FrontendServer() { Shutdown(); }

  // Reads the TLS files (an InvalidArgument naming a bad one, before any
  // waiting), waits for the engine's tokenizer, then listens.
  absl::Status Start();
  int port() const { return server_ ? server_->port() : 0; }
  // Stops accepting calls and lets running requests finish for up to
  // `grace`; the rest end with finish_reason ABORT, then streams are closed.
  void Shutdown(absl::Duration grace = absl::ZeroDuration());
  void Wait();
  EngineClient* engine() { return engine_.get(); }

 private:
  FrontendOptions options_;
  std::unique_ptr<EngineClient> engine_;
  std::unique_ptr<InferenceService> inference_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<HealthServer> server_;
  bool shut_down_ = false;
};

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_FRONTEND_SERVER_H_
