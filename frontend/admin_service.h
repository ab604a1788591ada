// rill.v1.Admin on the frontend: bearer-token check, then each call is
// forwarded to the engine's Admin service with the same token (the engine
// checks it too; base/call_auth.h).
#ifndef RILL_FRONTEND_ADMIN_SERVICE_H_
#define RILL_FRONTEND_ADMIN_SERVICE_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "base/strict_service.h"
#include "rill/v1/admin.grpc.pb.h"

namespace rill::frontend {

#define RILL_ADMIN_METHODS(X)                                             \
  X(StartProfile, StartProfileRequest, StartProfileResponse)              \
  X(StopProfile, StopProfileRequest, StopProfileResponse)                 \
  X(ResetPrefixCache, ResetPrefixCacheRequest, ResetPrefixCacheResponse)  \
  X(Sleep, SleepRequest, SleepResponse)                                   \
  X(WakeUp, WakeUpRequest, WakeUpResponse)                                \
  X(IsSleeping, IsSleepingRequest, IsSleepingResponse)                    \
  X(AddLora, AddLoraRequest, AddLoraResponse)                             \
  X(RemoveLora, RemoveLoraRequest, RemoveLoraResponse)                    \
  X(ListLoras, ListLorasRequest, ListLorasResponse)                       \
  X(GetStats, GetStatsRequest, Stats)                                     \
  X(CollectiveRpc, CollectiveRpcRequest, CollectiveRpcResponse)

class AdminService final : public base::StrictService<rill::v1::Admin> {
 public:
  // `token` must be non-empty: the service is only served with one.
  AdminService(std::string token, std::shared_ptr<grpc::Channel> engine);

#define RILL_ADMIN_DECLARE(Name, Req, Resp)                              \
  grpc::Status Name(grpc::ServerContext* ctx, const rill::v1::Req* req, \
                    rill::v1::Resp* resp) override;
  RILL_ADMIN_METHODS(RILL_ADMIN_DECLARE)
#undef RILL_ADMIN_DECLARE

 private:
  // UNAUTHENTICATED unless `authorization: Bearer <token>` matches.
  grpc::Status Authorize(grpc::ServerContext* ctx) const;
  // Before the request is parsed too: a caller without the token gets
  // UNAUTHENTICATED whatever bytes it sent.
  grpc::Status Admit(grpc::ServerContext* ctx) override { return Authorize(ctx); }

  const std::string token_;
  std::unique_ptr<rill::v1::Admin::Stub> stub_;
};

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_ADMIN_SERVICE_H_
