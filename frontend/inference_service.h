// rill.v1.Inference on the frontend: Generate through GenerateSession, local
// Tokenize / Detokenize, everything else forwarded to the engine.
#ifndef RILL_FRONTEND_INFERENCE_SERVICE_H_
#define RILL_FRONTEND_INFERENCE_SERVICE_H_

#include <atomic>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

#include "base/strict_service.h"
#include "frontend/engine_client.h"
#include "frontend/generate_session.h"
#include "frontend/request_registry.h"
#include "rill/v1/inference.grpc.pb.h"

namespace rill::frontend {

class InferenceService final : public base::StrictService<rill::v1::Inference> {
 public:
  InferenceService(EngineClient* engine, SessionOptions options = {});

  // Generate reads raw bytes (base::ParseStrict per message, then
  // request_validator.h); registered in the constructor in place of the
  // generated handler, as are the unary methods (StrictService).
  grpc::Status GenerateRaw(grpc::ServerContext* ctx, RawGenerateStream* stream);

  grpc::Status Abort(grpc::ServerContext* ctx, const rill::v1::AbortRequest* req,
                     rill::v1::AbortResponse* resp) override;
  grpc::Status GetRequestStatus(grpc::ServerContext* ctx,
                                const rill::v1::GetRequestStatusRequest* req,
                                rill::v1::GetRequestStatusResponse* resp) override;
  grpc::Status Encode(grpc::ServerContext* ctx, const rill::v1::EncodeRequest* req,
                      rill::v1::EncodeResponse* resp) override;
  grpc::Status Tokenize(grpc::ServerContext* ctx, const rill::v1::TokenizeRequest* req,
                        rill::v1::TokenizeResponse* resp) override;
  grpc::Status Detokenize(grpc::ServerContext* ctx, const rill::v1::DetokenizeRequest* req,
                          rill::v1::DetokenizeResponse* resp) override;
  grpc::Status GetModelConfig(grpc::ServerContext* ctx, const rill::v1::GetModelConfigRequest* req,
                              rill::v1::ModelConfig* resp) override;
  grpc::Status GetServerConfig(grpc::ServerContext* ctx,
                               const rill::v1::GetServerConfigRequest* req,
                               rill::v1::ServerConfig* resp) override;
  grpc::Status GetLoad(grpc::ServerContext* ctx, const rill::v1::GetLoadRequest* req,
                       rill::v1::Load* resp) override;
  grpc::Status CheckHealth(grpc::ServerContext* ctx, const rill::v1::CheckHealthRequest* req,
                           rill::v1::CheckHealthResponse* resp) override;

  // Graceful shutdown: waits up to `grace` for running requests to finish,
  // then ends the rest with finish_reason ABORT.
  void Drain(absl::Duration grace);
  int pending_requests() const { return pending_requests_.load(); }

 private:
  EngineClient* const engine_;
  const SessionOptions options_;
  std::atomic<int> open_streams_{0};
  std::atomic<int> pending_requests_{0};
  RequestRegistry registry_;
  absl::Mutex sessions_mu_;
  absl::flat_hash_set<GenerateSession*> sessions_ ABSL_GUARDED_BY(sessions_mu_);
};

// A client context for a forwarded call: the caller's deadline, if any.
std::unique_ptr<grpc::ClientContext> ForwardContext(grpc::ServerContext* server_ctx);
// Adds grpc-retry-pushback-ms when `s` is UNAVAILABLE; returns `s`.
grpc::Status WithRetryHint(grpc::ServerContext* ctx, grpc::Status s);

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_INFERENCE_SERVICE_H_
