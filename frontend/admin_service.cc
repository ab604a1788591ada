#include "frontend/admin_service.h"

#include "frontend/inference_service.h"

namespace rill::frontend {

AdminService::AdminService(std::string token, std::shared_ptr<grpc::Channel> engine)
    : token_(std::move(token)), stub_(rill::v1::Admin::NewStub(engine)) {
#define RILL_ADMIN_PARSE_STRICTLY(Name, Req, Resp) ParseStrictly(this, #Name, &AdminService::Name);
  RILL_ADMIN_METHODS(RILL_ADMIN_PARSE_STRICTLY)
#undef RILL_ADMIN_PARSE_STRICTLY
}

grpc::Status AdminService::Authorize(grpc::ServerContext* ctx) const {
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "admin: missing `authorization: Bearer <token>` metadata");
  }
  std::string value(it->second.data(), it->second.size());
  const std::string want = "Bearer " + token_;
  // Constant-time compare: the token is a secret.
  bool same = value.size() == want.size();
  unsigned char diff = 0;
  for (size_t i = 0; same && i < want.size(); ++i) diff |= value[i] ^ want[i];
  if (!same || diff != 0) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "admin: invalid token");
  }
  return grpc::Status::OK;
}

#define RILL_ADMIN_DEFINE(Name, Req, Resp)                                              \
  grpc::Status AdminService::Name(grpc::ServerContext* ctx, const rill::v1::Req* req,  \
                                  rill::v1::Resp* resp) {                              \
    if (grpc::Status s = Authorize(ctx); !s.ok()) return s;                            \
    auto c = ForwardContext(ctx);                                                      \
    return WithRetryHint(ctx, stub_->Name(c.get(), *req, resp));                       \
  }
RILL_ADMIN_METHODS(RILL_ADMIN_DEFINE)
#undef RILL_ADMIN_DEFINE

}  // namespace rill::frontend
