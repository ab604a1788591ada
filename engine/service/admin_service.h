// rill.v1.Admin on the engine's internal port (frontends forward to it).
// Every call must carry the admin token (base/call_auth.h); the server only
// registers it with one. CollectiveRpc only runs allow-listed methods.
#ifndef RILL_ENGINE_SERVICE_ADMIN_SERVICE_H_
#define RILL_ENGINE_SERVICE_ADMIN_SERVICE_H_

#include <atomic>
#include <string>

#include "base/call_auth.h"
#include "base/strict_service.h"
#include "engine/service/engine_host.h"
#include "rill/v1/admin.grpc.pb.h"

namespace rill::engine::service {

class AdminServiceImpl final : public base::StrictService<rill::v1::Admin> {
 public:
  // `profile_dir`: where traces go when StartProfile names no dir.
  AdminServiceImpl(EngineHost* host, std::string profile_dir, std::string token);

  grpc::Status StartProfile(grpc::ServerContext*, const rill::v1::StartProfileRequest*,
                            rill::v1::StartProfileResponse*) override;
  grpc::Status StopProfile(grpc::ServerContext*, const rill::v1::StopProfileRequest*,
                           rill::v1::StopProfileResponse*) override;
  grpc::Status ResetPrefixCache(grpc::ServerContext*, const rill::v1::ResetPrefixCacheRequest*,
                                rill::v1::ResetPrefixCacheResponse*) override;
  grpc::Status Sleep(grpc::ServerContext*, const rill::v1::SleepRequest*,
                     rill::v1::SleepResponse*) override;
  grpc::Status WakeUp(grpc::ServerContext*, const rill::v1::WakeUpRequest*,
                      rill::v1::WakeUpResponse*) override;
  grpc::Status IsSleeping(grpc::ServerContext*, const rill::v1::IsSleepingRequest*,
                          rill::v1::IsSleepingResponse*) override;
  grpc::Status AddLora(grpc::ServerContext*, const rill::v1::AddLoraRequest*,
                       rill::v1::AddLoraResponse*) override;
  grpc::Status RemoveLora(grpc::ServerContext*, const rill::v1::RemoveLoraRequest*,
                          rill::v1::RemoveLoraResponse*) override;
  grpc::Status ListLoras(grpc::ServerContext*, const rill::v1::ListLorasRequest*,
                         rill::v1::ListLorasResponse*) override;
  grpc::Status GetStats(grpc::ServerContext*, const rill::v1::GetStatsRequest*,
                        rill::v1::Stats*) override;
  grpc::Status CollectiveRpc(grpc::ServerContext*, const rill::v1::CollectiveRpcRequest*,
                             rill::v1::CollectiveRpcResponse*) override;

 private:
  EngineHost* const host_;
  const std::string profile_dir_;
  const std::string token_;

  // Before a request's bytes are parsed: no token, no answer about them.
  grpc::Status Admit(grpc::ServerContext* ctx) override {
    return base::CheckAdminToken(*ctx, token_);
  }
  std::atomic<int> sleep_level_{0};
};

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_ADMIN_SERVICE_H_
