// The gRPC server of a rill-engine process: rill.internal.Engine and
// vllm.grpc.engine.VllmEngine (the gateway protocol; both need the engine
// secret), rill.v1.Admin (only with an admin token, and requiring
// it) and grpc.health.v1 (open to probes: overall and "rill.internal.Engine",
// kept in step with the engine by a poller; "liveness" is SERVING unless the
// engine is dead, so a sleeping or loading engine passes a liveness probe). No reflection: it would
// advertise services an unauthenticated caller cannot use. Not
// frontend::HealthServer: shutdown here needs a deadline so open Generate
// streams get cancelled.
#ifndef RILL_ENGINE_SERVICE_ENGINE_SERVER_H_
#define RILL_ENGINE_SERVICE_ENGINE_SERVER_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/health_service.h"
#include "engine/service/admin_service.h"
#include "engine/service/engine_host.h"
#include "engine/service/engine_service.h"
#include "engine/service/vllm_engine_service.h"
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>

namespace rill::engine::service {

// Who may call what on the engine's port (metadata as in base/call_auth.h).
struct EngineAuth {
  // Every rill.internal.Engine call must carry it. Empty only where the
  // port requires client certificates (mutual TLS) instead; rill-engine
  // refuses to start with neither.
  std::string engine_secret;
  // rill.v1.Admin is served only when set, and every call must carry it.
  std::string admin_token;
  // vllm.grpc.engine.VllmEngine takes calls without a credential: for a
  // gateway on the same machine that sends none (smg 1.13 authenticates to
  // no gRPC worker); rill-engine allows it only on a loopback address or
  // with --vllm_api_network_restricted.
  bool vllm_api_without_credentials = false;
};

// The grpc.health.v1 service name a liveness probe asks for.
inline constexpr char kLivenessHealthService[] = "liveness";

class EngineServer {
 public:
  // `credentials` null: plaintext (see base/tls_credentials.h for TLS).
  EngineServer(EngineHost* host, std::string address, std::string profile_dir, EngineAuth auth,
               std::shared_ptr<grpc::ServerCredentials> credentials = nullptr);
  ~EngineServer();

  absl::Status Start();  // Listens and starts the health poller.
  int port() const { return port_; }

  // How long the engine has been dead (zero while alive or loading).
  absl::Duration DeadFor() const;

  // Stops the poller and the server (open calls are cancelled after `grace`).
  void Shutdown(absl::Duration grace = absl::Seconds(2));

 private:
  void PollHealth();

  EngineHost* const host_;
  EngineServiceImpl engine_service_;
  VllmEngineServiceImpl vllm_service_;
  AdminServiceImpl admin_service_;
  const bool serve_admin_;
  base::HealthService health_;  // Outlives server_ (declared before it).
  void SetServing(bool serving);

  const std::string address_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::thread poller_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ = false;
  absl::Time dead_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_ENGINE_SERVER_H_
