#include "frontend/admin_service.h"

#include "base/call_auth.h"
#include "frontend/inference_service.h"

namespace rill::frontend {

AdminService::AdminService(std::string token, std::shared_ptr<grpc::Channel> engine)
    : token_(std::move(token)), stub_(rill::v1::Admin::NewStub(engine)) {
#define RILL_ADMIN_PARSE_STRICTLY(Name, Req, Resp) ParseStrictly(this, #Name, &AdminService::Name);
  RILL_ADMIN_METHODS(RILL_ADMIN_PARSE_STRICTLY)
#undef RILL_ADMIN_PARSE_STRICTLY
}

grpc::Status AdminService::Authorize(grpc::ServerContext* ctx) const {
  return base::CheckAdminToken(*ctx, token_);
}

#define RILL_ADMIN_DEFINE(Name, Req, Resp)                                              \
  grpc::Status AdminService::Name(grpc::ServerContext* ctx, const rill::v1::Req* req,  \
                                  rill::v1::Resp* resp) {                              \
    if (grpc::Status s = Authorize(ctx); !s.ok()) return s;                            \
    auto c = ForwardContext(ctx);                                                      \
    c->AddMetadata("authorization", "Bearer " + token_);                               \
    return WithRetryHint(ctx, stub_->Name(c.get(), *req, resp));                       \
  }
RILL_ADMIN_METHODS(RILL_ADMIN_DEFINE)
#undef RILL_ADMIN_DEFINE

}  // namespace rill::frontend
