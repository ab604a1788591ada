// vllm.grpc.engine.VllmEngine: vLLM's token-in/token-out engine protocol as
// the Shepherd Model Gateway (smg) speaks it, served by rill-engine beside
// rill.internal.Engine on the same port and behind the same credential. The
// protocol's files come from the pinned smg-grpc-proto wheel (//proto/smg).
// Each piece lives in its own file: conversions (vllm_convert.h), Generate
// (vllm_generate.h), the tokenizer zip (tokenizer_zip.h), KV events
// (kv_event_feed.h).
#ifndef RILL_ENGINE_SERVICE_VLLM_ENGINE_SERVICE_H_
#define RILL_ENGINE_SERVICE_VLLM_ENGINE_SERVICE_H_

#include <memory>
#include <string>

#include "absl/base/call_once.h"
#include "absl/time/time.h"
#include "engine/service/engine_host.h"
#include "engine/service/kv_event_feed.h"
#include "engine/service/vllm_generate.h"
#include "tokenizer/bpe_tokenizer.h"
#include "vllm_engine.grpc.pb.h"

namespace rill::engine::service {

class VllmEngineServiceImpl final : public ::vllm::grpc::engine::VllmEngine::Service {
 public:
  // `secret`: as EngineServiceImpl's; empty: no credential is checked (the
  // port requires client certificates, or EngineAuth::
  // vllm_api_without_credentials). It may come as `rill-engine-secret`
  // metadata or as `authorization: Bearer <secret>` (a worker API key).
  // `profile_dir`: where StartProfile's traces go (callers cannot choose).
  VllmEngineServiceImpl(EngineHost* host, std::string secret, std::string profile_dir);
  ~VllmEngineServiceImpl() override;

  using GenerateWriter = grpc::ServerWriter<::vllm::grpc::engine::GenerateResponse>;
  grpc::Status Generate(grpc::ServerContext* context,
                        const ::vllm::grpc::engine::GenerateRequest* request,
                        GenerateWriter* writer) override;
  grpc::Status Embed(grpc::ServerContext* context, const ::vllm::grpc::engine::EmbedRequest* request,
                     ::vllm::grpc::engine::EmbedResponse* response) override;
  grpc::Status HealthCheck(grpc::ServerContext* context,
                           const ::vllm::grpc::engine::HealthCheckRequest* request,
                           ::vllm::grpc::engine::HealthCheckResponse* response) override;
  grpc::Status FlushCache(grpc::ServerContext* context,
                          const ::smg::grpc::common::FlushCacheRequest* request,
                          ::smg::grpc::common::FlushCacheResponse* response) override;
  grpc::Status StartProfile(grpc::ServerContext* context,
                            const ::smg::grpc::common::StartProfileRequest* request,
                            ::smg::grpc::common::ProfileResponse* response) override;
  grpc::Status StopProfile(grpc::ServerContext* context,
                           const ::smg::grpc::common::StopProfileRequest* request,
                           ::smg::grpc::common::ProfileResponse* response) override;
  grpc::Status Abort(grpc::ServerContext* context, const ::vllm::grpc::engine::AbortRequest* request,
                     ::vllm::grpc::engine::AbortResponse* response) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context,
                            const ::vllm::grpc::engine::GetModelInfoRequest* request,
                            ::vllm::grpc::engine::GetModelInfoResponse* response) override;
  grpc::Status GetServerInfo(grpc::ServerContext* context,
                             const ::vllm::grpc::engine::GetServerInfoRequest* request,
                             ::vllm::grpc::engine::GetServerInfoResponse* response) override;
  grpc::Status GetLoads(grpc::ServerContext* context,
                        const ::vllm::grpc::engine::GetLoadsRequest* request,
                        ::vllm::grpc::engine::GetLoadsResponse* response) override;
  grpc::Status GetTokenizer(grpc::ServerContext* context,
                            const ::smg::grpc::common::GetTokenizerRequest* request,
                            grpc::ServerWriter<::smg::grpc::common::GetTokenizerChunk>* writer) override;
  grpc::Status SubscribeKvEvents(
      grpc::ServerContext* context, const ::smg::grpc::common::SubscribeKvEventsRequest* request,
      grpc::ServerWriter<::smg::grpc::common::KvEventBatch>* writer) override;

 private:
  grpc::Status Authorize(const grpc::ServerContext& context) const;
  // The engine's tokenizer (built once from the host's spec); null without one.
  const tokenizer::BpeTokenizer* Tokenizer();
  // The KV event feed, attached to the engine on first use (it must be loaded).
  KvEventFeed* Feed();

  EngineHost* const host_;
  const std::string secret_;
  const std::string profile_dir_;
  const absl::Time started_ = absl::Now();
  LiveVllmRequests live_;
  absl::once_flag tokenizer_once_;
  std::unique_ptr<tokenizer::BpeTokenizer> tokenizer_;
  absl::once_flag feed_once_;
  std::unique_ptr<KvEventFeed> feed_;
};

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_VLLM_ENGINE_SERVICE_H_
