// rill.internal.Engine: the frontend-facing RPCs of a rill-engine process.
#ifndef RILL_ENGINE_SERVICE_ENGINE_SERVICE_H_
#define RILL_ENGINE_SERVICE_ENGINE_SERVICE_H_

#include <string>

#include "base/strict_service.h"
#include "engine/service/engine_host.h"
#include "rill/internal/engine.grpc.pb.h"

namespace rill::engine::service {

// Every call must carry the engine secret (base/call_auth.h) unless
// `secret` is empty (the port then requires client certificates); it is
// checked before a request is parsed (Admit).
class EngineServiceImpl final : public base::StrictService<rill::internal::Engine> {
 public:
  EngineServiceImpl(EngineHost* host, std::string secret);

  grpc::Status Generate(grpc::ServerContext* context,
                        grpc::ServerReaderWriter<rill::internal::EngineOutput,
                                                 rill::internal::EngineRequest>* stream) override;
  grpc::Status Abort(grpc::ServerContext* context, const rill::v1::AbortRequest* request,
                     rill::v1::AbortResponse* response) override;
  grpc::Status GetRequestStatus(grpc::ServerContext* context,
                                const rill::v1::GetRequestStatusRequest* request,
                                rill::v1::GetRequestStatusResponse* response) override;
  grpc::Status Encode(grpc::ServerContext* context,
                      const rill::internal::EngineEncodeRequest* request,
                      rill::v1::EncodeResponse* response) override;
  grpc::Status GetTokenizer(grpc::ServerContext* context,
                            const rill::internal::GetTokenizerRequest* request,
                            rill::internal::TokenizerSpec* response) override;
  grpc::Status GetModelConfig(grpc::ServerContext* context,
                              const rill::v1::GetModelConfigRequest* request,
                              rill::v1::ModelConfig* response) override;
  grpc::Status GetServerConfig(grpc::ServerContext* context,
                               const rill::v1::GetServerConfigRequest* request,
                               rill::v1::ServerConfig* response) override;
  grpc::Status GetLoad(grpc::ServerContext* context, const rill::v1::GetLoadRequest* request,
                       rill::v1::Load* response) override;
  grpc::Status CheckHealth(grpc::ServerContext* context,
                           const rill::v1::CheckHealthRequest* request,
                           rill::v1::CheckHealthResponse* response) override;

 private:
  grpc::Status Authorize(const grpc::ServerContext& context) const;
  grpc::Status Admit(grpc::ServerContext* ctx) override { return Authorize(*ctx); }

  EngineHost* const host_;
  const std::string secret_;
};

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_ENGINE_SERVICE_H_
