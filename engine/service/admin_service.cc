#include "engine/service/admin_service.h"

#include "absl/strings/str_cat.h"
#include "base/call_auth.h"
#include "engine/service/proto_convert.h"
#include "engine/service/status_convert.h"

namespace rill::engine::service {

AdminServiceImpl::AdminServiceImpl(EngineHost* host, std::string profile_dir, std::string token)
    : host_(host), profile_dir_(std::move(profile_dir)), token_(std::move(token)) {
  ParseStrictly(this, "StartProfile", &AdminServiceImpl::StartProfile);
  ParseStrictly(this, "StopProfile", &AdminServiceImpl::StopProfile);
  ParseStrictly(this, "ResetPrefixCache", &AdminServiceImpl::ResetPrefixCache);
  ParseStrictly(this, "Sleep", &AdminServiceImpl::Sleep);
  ParseStrictly(this, "WakeUp", &AdminServiceImpl::WakeUp);
  ParseStrictly(this, "IsSleeping", &AdminServiceImpl::IsSleeping);
  ParseStrictly(this, "AddLora", &AdminServiceImpl::AddLora);
  ParseStrictly(this, "RemoveLora", &AdminServiceImpl::RemoveLora);
  ParseStrictly(this, "ListLoras", &AdminServiceImpl::ListLoras);
  ParseStrictly(this, "GetStats", &AdminServiceImpl::GetStats);
  ParseStrictly(this, "CollectiveRpc", &AdminServiceImpl::CollectiveRpc);
}

#define RILL_REQUIRE_ENGINE()                                          \
  if (host_->engine() == nullptr) return ToGrpcStatus(host_->Usable()); \
  engine::AsyncEngine* engine = host_->engine()

grpc::Status AdminServiceImpl::StartProfile(grpc::ServerContext* context,
                                            const rill::v1::StartProfileRequest* request,
                                            rill::v1::StartProfileResponse*) {
  if (grpc::Status s = base::CheckAdminToken(*context, token_); !s.ok()) return s;
  RILL_REQUIRE_ENGINE();
  return ToGrpcStatus(engine->StartProfile(request->dir().empty() ? profile_dir_ : request->dir()));
}

grpc::Status AdminServiceImpl::StopProfile(grpc::ServerContext* context, const rill::v1::StopProfileRequest*,
                                           rill::v1::StopProfileResponse* response) {
  if (grpc::Status s = base::CheckAdminToken(*context, token_); !s.ok()) return s;
  RILL_REQUIRE_ENGINE();
  absl::StatusOr<std::string> path = engine->StopProfile();
  if (!path.ok()) return ToGrpcStatus(path.status());
  response->set_trace_path(*path);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::ResetPrefixCache(grpc::ServerContext* context,
                                                const rill::v1::ResetPrefixCacheRequest*,
                                                rill::v1::ResetPrefixCacheResponse* response) {
  if (grpc::Status s = base::CheckAdminToken(*context, token_); !s.ok()) return s;
  RILL_REQUIRE_ENGINE();
  if (absl::Status s = engine->ResetPrefixCache(); !s.ok()) return ToGrpcStatus(s);
  response->set_message("dropped every cached prefix block");
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::Sleep(grpc::ServerContext* context, const rill::v1::SleepRequest* request,
                                     rill::v1::SleepResponse*) {
  if (grpc::Status s = base::CheckAdminToken(*context, token_); !s.ok()) return s;
  RILL_REQUIRE_ENGINE();
  const int level = request->level() == 0 ? 1 : request->level();
  if (absl::Status s = engine->Sleep(level); !s.ok()) return ToGrpcStatus(s);
  sleep_level_ = level;
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::WakeUp(grpc::ServerContext* context, const rill::v1::WakeUpRequest* request,
                                      rill::v1::WakeUpResponse*) {
  if (grpc::Status s = base::CheckAdminToken(*context, token_); !s.ok()) return s;
  RILL_REQUIRE_ENGINE();
  for (const std::string& tag : request->tags()) {
    if (tag != "weights" && tag != "kv_cache") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("unknown wake-up tag '", tag,
                                       "' (expected \"weights\" or \"kv_cache\")"));
    }
  }
  if (absl::Status s = engine->WakeUp(); !s.ok()) return ToGrpcStatus(s);
  sleep_level_ = 0;
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::IsSleeping(grpc::ServerContext* context, const rill::v1::IsSleepingRequest*,
                                          rill::v1::IsSleepingResponse* response) {
  if (grpc::Status s = base::CheckAdminToken(*context, token_); !s.ok()) return s;
  RILL_REQUIRE_ENGINE();
  response->set_sleeping(engine->IsSleeping());
  response->set_level(engine->IsSleeping() ? sleep_level_.load() : 0);
  return grpc::Status::OK;
}

namespace {

rill::v1::LoraAdapter ToProto(const engine::LoraInfo& info) {
  rill::v1::LoraAdapter a;
  a.set_name(info.name);
  a.set_id(info.id);
  a.set_path(info.path);
  a.set_rank(info.rank);
  return a;
}

}  // namespace

grpc::Status AdminServiceImpl::AddLora(grpc::ServerContext* context,
                                       const rill::v1::AddLoraRequest* request,
                                       rill::v1::AddLoraResponse* response) {
  if (grpc::Status s = base::CheckAdminToken(*context, token_); !s.ok()) return s;
  RILL_REQUIRE_ENGINE();
  if (request->name().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "AddLora: name is empty");
  }
  if (request->path().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "AddLora: path is empty");
  }
  absl::StatusOr<engine::LoraInfo> info =
      engine->AddLora(engine::LoraRequest{request->name(), 0, request->path()});
  if (!info.ok()) return ToGrpcStatus(info.status());
  *response->mutable_adapter() = ToProto(*info);
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::RemoveLora(grpc::ServerContext* context,
                                          const rill::v1::RemoveLoraRequest* request,
                                          rill::v1::RemoveLoraResponse*) {
  if (grpc::Status s = base::CheckAdminToken(*context, token_); !s.ok()) return s;
  RILL_REQUIRE_ENGINE();
  return ToGrpcStatus(engine->RemoveLora(request->name()));
}

grpc::Status AdminServiceImpl::ListLoras(grpc::ServerContext* context, const rill::v1::ListLorasRequest*,
                                         rill::v1::ListLorasResponse* response) {
  if (grpc::Status s = base::CheckAdminToken(*context, token_); !s.ok()) return s;
  RILL_REQUIRE_ENGINE();
  for (const engine::LoraInfo& info : engine->ListLoras()) {
    *response->add_adapters() = ToProto(info);
  }
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::GetStats(grpc::ServerContext* context, const rill::v1::GetStatsRequest*,
                                        rill::v1::Stats* response) {
  if (grpc::Status s = base::CheckAdminToken(*context, token_); !s.ok()) return s;
  RILL_REQUIRE_ENGINE();
  *response = ToStats(engine->GetStatsWithRates());
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::CollectiveRpc(grpc::ServerContext* context,
                                             const rill::v1::CollectiveRpcRequest* request,
                                             rill::v1::CollectiveRpcResponse* response) {
  if (grpc::Status s = base::CheckAdminToken(*context, token_); !s.ok()) return s;
  RILL_REQUIRE_ENGINE();
  // The executor enforces the allow-list (ping, get_worker_info) and
  // reaches every tensor-parallel rank.
  absl::StatusOr<std::vector<std::string>> results = engine->CollectiveRpc(request->method());
  if (!results.ok()) return ToGrpcStatus(results.status());
  for (std::string& r : *results) response->add_results_json(std::move(r));
  return grpc::Status::OK;
}

#undef RILL_REQUIRE_ENGINE

}  // namespace rill::engine::service
