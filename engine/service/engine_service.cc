#include "engine/service/engine_service.h"

#include "absl/strings/str_cat.h"
#include "base/call_auth.h"
#include "base/engine_session.h"
#include "base/message_text.h"
#include "base/request_id.h"
#include "engine/service/generate_stream.h"
#include "engine/service/proto_convert.h"
#include "engine/service/status_convert.h"
#include "tokenizer/spec_proto.h"

namespace rill::engine::service {
namespace {

// The engine's NotFound names the scoped id; the caller knows only its own.
absl::Status WithClientId(const absl::Status& s, const std::string& id) {
  if (!absl::IsNotFound(s)) return s;
  return absl::NotFoundError(absl::StrCat("no such request '", ShortForMessage(id), "'"));
}

}  // namespace

grpc::Status EngineServiceImpl::Authorize(const grpc::ServerContext& context) const {
  if (secret_.empty()) return grpc::Status::OK;  // Mutual TLS authenticated the peer.
  return base::CheckEngineSecret(context, secret_);
}

EngineServiceImpl::EngineServiceImpl(EngineHost* host, std::string secret)
    : host_(host), secret_(std::move(secret)) {
  ParseStrictly(this, "Abort", &EngineServiceImpl::Abort);
  ParseStrictly(this, "GetRequestStatus", &EngineServiceImpl::GetRequestStatus);
  ParseStrictly(this, "Encode", &EngineServiceImpl::Encode);
  ParseStrictly(this, "GetTokenizer", &EngineServiceImpl::GetTokenizer);
  ParseStrictly(this, "GetModelConfig", &EngineServiceImpl::GetModelConfig);
  ParseStrictly(this, "GetServerConfig", &EngineServiceImpl::GetServerConfig);
  ParseStrictly(this, "GetLoad", &EngineServiceImpl::GetLoad);
  ParseStrictly(this, "CheckHealth", &EngineServiceImpl::CheckHealth);
}

grpc::Status EngineServiceImpl::Generate(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<rill::internal::EngineOutput, rill::internal::EngineRequest>*
        stream) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  return ServeGenerateStream(host_, context, stream);
}

grpc::Status EngineServiceImpl::Abort(grpc::ServerContext* context,
                                      const rill::v1::AbortRequest* request,
                                      rill::v1::AbortResponse*) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (absl::Status s = ValidateRequestIdLength(request->request_id()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::Status s = host_->Usable(); !s.ok()) return ToGrpcStatus(s);
  return ToGrpcStatus(WithClientId(
      host_->engine()->Abort(base::ScopedRequestId(SessionOf(*context), request->request_id())),
      request->request_id()));
}

grpc::Status EngineServiceImpl::GetRequestStatus(grpc::ServerContext* context,
                                                 const rill::v1::GetRequestStatusRequest* request,
                                                 rill::v1::GetRequestStatusResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (absl::Status s = ValidateRequestIdLength(request->request_id()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (host_->engine() == nullptr) return ToGrpcStatus(host_->Usable());
  absl::StatusOr<engine::RequestStatus> st = host_->engine()->GetRequestStatus(
      base::ScopedRequestId(SessionOf(*context), request->request_id()));
  if (!st.ok()) return ToGrpcStatus(WithClientId(st.status(), request->request_id()));
  response->set_request_id(request->request_id());
  response->set_state(ToProto(*st));
  return grpc::Status::OK;
}

grpc::Status EngineServiceImpl::Encode(grpc::ServerContext* context,
                                       const rill::internal::EngineEncodeRequest* request,
                                       rill::v1::EncodeResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (absl::Status s = ValidateRequestIdLength(request->request_id()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::Status s = host_->Usable(); !s.ok()) return ToGrpcStatus(s);
  engine::AsyncEngine* e = host_->engine();
  if (!e->SupportsEncode()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "embeddings (Encode) are not supported by this model: it cannot pool "
                        "hidden states");
  }
  if (!request->lora_name().empty()) {
    bool known = false;
    for (const engine::LoraInfo& l : e->ListLoras()) {
      known = known || l.name == request->lora_name();
    }
    if (!known) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("LoRA adapter '", ShortForMessage(request->lora_name()),
                                     "' is not loaded"));
    }
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "Encode does not run LoRA adapters (Generate does)");
  }
  engine::PoolingParams params = FromProto(request->pooling());
  std::vector<int32_t> ids(request->prompt_token_ids().begin(), request->prompt_token_ids().end());
  absl::StatusOr<engine::EmbeddingOutput> out = e->Encode(
      ids, params, base::ScopedRequestId(SessionOf(*context), request->request_id()));
  if (!out.ok()) return ToGrpcStatus(out.status());
  response->set_request_id(request->request_id());
  *response->mutable_embedding() = {out->embedding.begin(), out->embedding.end()};
  response->set_num_prompt_tokens(out->num_prompt_tokens);
  return grpc::Status::OK;
}

grpc::Status EngineServiceImpl::GetTokenizer(grpc::ServerContext* context,
                                             const rill::internal::GetTokenizerRequest*,
                                             rill::internal::TokenizerSpec* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (host_->engine() == nullptr) return ToGrpcStatus(host_->Usable());
  const tokenizer::TokenizerSpec* spec = host_->tokenizer_spec();
  if (spec == nullptr && !host_->wordpiece_json().empty()) {
    response->set_model("wordpiece");
    response->set_wordpiece_json(host_->wordpiece_json());
    response->set_max_model_len(host_->engine()->GetEngineConfig().model.max_model_len);
    return grpc::Status::OK;
  }
  if (spec == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this model has no tokenizer");
  }
  *response = tokenizer::SpecToProto(*spec, host_->engine()->GetEngineConfig().model.max_model_len);
  return grpc::Status::OK;
}

grpc::Status EngineServiceImpl::GetModelConfig(grpc::ServerContext* context,
                                               const rill::v1::GetModelConfigRequest*,
                                               rill::v1::ModelConfig* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (host_->engine() == nullptr) return ToGrpcStatus(host_->Usable());
  const tokenizer::TokenizerSpec* spec = host_->tokenizer_spec();
  *response = ToModelConfig(host_->options().model_name, host_->engine()->GetEngineConfig(),
                            spec != nullptr && !spec->chat_template.empty(),
                            host_->engine()->SupportsEncode());
  return grpc::Status::OK;
}

grpc::Status EngineServiceImpl::GetServerConfig(grpc::ServerContext* context,
                                                const rill::v1::GetServerConfigRequest*,
                                                rill::v1::ServerConfig* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (host_->engine() == nullptr) return ToGrpcStatus(host_->Usable());
  *response = ToServerConfig(host_->engine()->GetEngineConfig(),
                             host_->options().max_waiting_requests);
  // The budget adapts while serving: read live, not from the start-up config.
  response->mutable_scheduler()->set_step_token_budget(host_->engine()->GetStats().step_token_budget);
  response->set_is_tracing_enabled(host_->options().tracer != nullptr);
  for (const engine::LoraInfo& l : host_->engine()->ListLoras()) {
    response->mutable_lora()->add_loaded(l.name);
  }
  return grpc::Status::OK;
}

grpc::Status EngineServiceImpl::GetLoad(grpc::ServerContext* context,
                                        const rill::v1::GetLoadRequest*,
                                        rill::v1::Load* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (host_->engine() == nullptr) return ToGrpcStatus(host_->Usable());
  engine::AsyncEngine* e = host_->engine();
  *response = ToLoad(e->GetStats(), e->GetNumUnfinishedRequests());
  return grpc::Status::OK;
}

grpc::Status EngineServiceImpl::CheckHealth(grpc::ServerContext* context,
                                            const rill::v1::CheckHealthRequest*,
                                            rill::v1::CheckHealthResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  absl::Status s = host_->Serving();
  response->set_healthy(s.ok());
  response->set_message(s.ok() ? "serving" : std::string(s.message()));
  return grpc::Status::OK;
}

}  // namespace rill::engine::service
