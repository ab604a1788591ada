#include "frontend/inference_service.h"

#include <malloc.h>

#include <vector>

#include <grpcpp/support/method_handler.h>

#include "absl/strings/str_cat.h"
#include "base/message_text.h"
#include "base/request_id.h"
#include "frontend/frontend_metrics.h"
#include "frontend/request_validator.h"

namespace rill::frontend {

std::unique_ptr<grpc::ClientContext> ForwardContext(grpc::ServerContext* server_ctx) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  auto deadline = server_ctx->deadline();
  auto cap = std::chrono::system_clock::now() + std::chrono::seconds(60);
  ctx->set_deadline(deadline < cap ? deadline : cap);
  return ctx;
}

grpc::Status WithRetryHint(grpc::ServerContext* ctx, grpc::Status s) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    ctx->AddTrailingMetadata("grpc-retry-pushback-ms",
                             std::to_string(EngineClient::kRetryPushbackMs));
  }
  return s;
}

InferenceService::InferenceService(EngineClient* engine, SessionOptions options)
    : engine_(engine), options_(std::move(options)) {
  // Method 0 is Generate (declaration order in inference.proto).
  MarkMethodStreamed(
      0, new grpc::internal::BidiStreamingHandler<InferenceService, grpc::ByteBuffer,
                                                  rill::v1::GenerateResponse>(
             [](InferenceService* self, grpc::ServerContext* ctx, RawGenerateStream* stream) {
               return self->GenerateRaw(ctx, stream);
             },
             this));
  ParseStrictly(this, "Abort", &InferenceService::Abort);
  ParseStrictly(this, "GetRequestStatus", &InferenceService::GetRequestStatus);
  ParseStrictly(this, "Encode", &InferenceService::Encode);
  ParseStrictly(this, "Tokenize", &InferenceService::Tokenize);
  ParseStrictly(this, "Detokenize", &InferenceService::Detokenize);
  ParseStrictly(this, "GetModelConfig", &InferenceService::GetModelConfig);
  ParseStrictly(this, "GetServerConfig", &InferenceService::GetServerConfig);
  ParseStrictly(this, "GetLoad", &InferenceService::GetLoad);
  ParseStrictly(this, "CheckHealth", &InferenceService::CheckHealth);
}

grpc::Status InferenceService::GenerateRaw(grpc::ServerContext* ctx, RawGenerateStream* stream) {
  ++open_streams_;
  if (options_.metrics != nullptr) options_.metrics->StreamOpened();
  auto session = std::make_shared<GenerateSession>(engine_, ctx, stream, options_,
                                                   &pending_requests_, &registry_);
  {
    absl::MutexLock l(&sessions_mu_);
    sessions_.insert(session.get());
  }
  grpc::Status s = session->Run();
  {
    absl::MutexLock l(&sessions_mu_);
    sessions_.erase(session.get());
  }
  // The last stream gone: give the heap that gRPC's and the sessions'
  // threads freed back to the kernel (glibc keeps it per arena otherwise, and
  // a frontend that served a burst would stay tens of MB larger after it).
  if (options_.metrics != nullptr) options_.metrics->StreamClosed();
  if (--open_streams_ == 0) malloc_trim(0);
  return s;
}

void InferenceService::Drain(absl::Duration grace) {
  absl::Time end = absl::Now() + grace;
  while (pending_requests_.load() > 0 && absl::Now() < end) absl::SleepFor(absl::Milliseconds(20));
  absl::MutexLock l(&sessions_mu_);
  for (GenerateSession* s : sessions_) s->AbortForShutdown();
  // Every request has ended: close the streams once their last responses
  // (finished or ABORT) are written, rather than when the server's shutdown
  // deadline cancels them.
  const absl::Time flush_deadline = absl::Now() + absl::Seconds(1);
  for (GenerateSession* s : sessions_) s->EndForShutdown(flush_deadline);
}

namespace {

// Empty or over-long ids: INVALID_ARGUMENT; else OK.
grpc::Status CheckRequestId(const std::string& id) {
  if (id.empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request_id: empty");
  absl::Status s = ValidateRequestIdLength(id);
  if (!s.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message()));
  return grpc::Status::OK;
}

// The same answer whether the id is unknown or another client's, so probing
// tells nothing.
grpc::Status NotThisClients(const std::string& id) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      absl::StrCat("no unfinished request '", ShortForMessage(id),
                                   "' started on this connection"));
}

}  // namespace

grpc::Status InferenceService::Abort(grpc::ServerContext* ctx, const rill::v1::AbortRequest* req,
                                     rill::v1::AbortResponse* resp) {
  if (grpc::Status s = CheckRequestId(req->request_id()); !s.ok()) return s;
  // Only the caller's own requests: those started on this connection.
  std::optional<RequestRegistry::Running> owner =
      registry_.FindRunning(req->request_id(), ctx->peer());
  std::shared_ptr<GenerateSession> session = owner ? owner->session.lock() : nullptr;
  // The session sends the request's finished ABORT response on its stream.
  if (session == nullptr || !session->AbortRequest(req->request_id())) {
    return NotThisClients(req->request_id());
  }
  return grpc::Status::OK;
}

grpc::Status InferenceService::GetRequestStatus(grpc::ServerContext* ctx,
                                                const rill::v1::GetRequestStatusRequest* req,
                                                rill::v1::GetRequestStatusResponse* resp) {
  if (grpc::Status s = CheckRequestId(req->request_id()); !s.ok()) return s;
  const std::string& id = req->request_id();
  resp->set_request_id(id);
  std::optional<RequestRegistry::Running> owner = registry_.FindRunning(id, ctx->peer());
  if (!owner) {
    std::optional<rill::v1::RequestState> state = registry_.FindFinished(id, ctx->peer());
    if (!state) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no request '", ShortForMessage(id),
                                       "' started on this connection"));
    }
    resp->set_state(*state);
    return grpc::Status::OK;
  }
  // Running for the client: the engine tells waiting from running.
  auto c = ForwardContext(ctx);
  engine_->AddSessionMetadata(c.get());
  rill::v1::GetRequestStatusRequest engine_req;
  engine_req.set_request_id(owner->engine_id);
  rill::v1::GetRequestStatusResponse engine_resp;
  grpc::Status s = engine_->stub()->GetRequestStatus(c.get(), engine_req, &engine_resp);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
    // The start has not reached the engine yet.
    resp->set_state(rill::v1::REQUEST_STATE_WAITING);
    return grpc::Status::OK;
  }
  if (!s.ok()) return WithRetryHint(ctx, s);
  // Finished at the engine but not yet for the client (its last response is
  // on the way): still running from the client's point of view.
  rill::v1::RequestState state = engine_resp.state();
  if (state != rill::v1::REQUEST_STATE_WAITING) state = rill::v1::REQUEST_STATE_RUNNING;
  resp->set_state(state);
  return grpc::Status::OK;
}

grpc::Status InferenceService::Encode(grpc::ServerContext* ctx, const rill::v1::EncodeRequest* req,
                                      rill::v1::EncodeResponse* resp) {
  if (absl::Status s = ValidateRequestIdLength(req->request_id()); !s.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message()));
  }
  rill::internal::EngineEncodeRequest er;
  er.set_request_id(req->request_id().empty() ? engine_->NewRequestId() : req->request_id());
  if (req->prompt_case() == rill::v1::EncodeRequest::kText) {
    if (req->text().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "text: empty");
    const std::vector<int32_t> ids = engine_->wordpiece() != nullptr
                                         ? engine_->wordpiece()->Encode(req->text())
                                         : engine_->tokenizer().Encode(req->text());
    for (int32_t id : ids) er.add_prompt_token_ids(id);
  } else if (req->prompt_case() == rill::v1::EncodeRequest::kTokenIds) {
    *er.mutable_prompt_token_ids() = req->token_ids().ids();
  } else {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "prompt: set text or token_ids");
  }
  *er.mutable_pooling() = req->pooling();
  er.set_lora_name(req->lora_name());
  er.set_priority(req->priority());
  auto c = ForwardContext(ctx);
  engine_->AddSessionMetadata(c.get());
  return WithRetryHint(ctx, engine_->stub()->Encode(c.get(), er, resp));
}

grpc::Status InferenceService::Tokenize(grpc::ServerContext* ctx,
                                        const rill::v1::TokenizeRequest* req,
                                        rill::v1::TokenizeResponse* resp) {
  if (!engine_->can_generate()) {
    // Encoder (WordPiece): plain text only, no chat template.
    if (req->input_case() != rill::v1::TokenizeRequest::kText) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "this model is an encoder: only text can be tokenized");
    }
    const bool special = req->has_add_special_tokens() ? req->add_special_tokens() : true;
    for (int32_t id : engine_->wordpiece()->Encode(req->text(), special)) resp->add_token_ids(id);
    resp->set_count(resp->token_ids_size());
    resp->set_max_model_len(engine_->max_model_len());
    return grpc::Status::OK;
  }
  const tokenizer::Tokenizer& tok = engine_->tokenizer();
  rill::v1::StartRequest start;
  if (req->input_case() == rill::v1::TokenizeRequest::kText) {
    start.set_text(req->text());
  } else if (req->input_case() == rill::v1::TokenizeRequest::kChat) {
    *start.mutable_chat() = req->chat();
  } else {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "input: set text or chat");
  }
  if (req->has_add_special_tokens()) start.set_add_special_tokens(req->add_special_tokens());
  std::vector<int32_t> ids;
  std::string text;
  absl::Status s = BuildPrompt(tok, start, options_.limits, &ids, &text);
  if (!s.ok()) return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
  for (int32_t id : ids) {
    resp->add_token_ids(id);
    if (req->return_token_strings()) resp->add_tokens(tok.bpe().IdToToken(id));
  }
  resp->set_count(ids.size());
  resp->set_max_model_len(engine_->max_model_len());
  return grpc::Status::OK;
}

grpc::Status InferenceService::Detokenize(grpc::ServerContext* ctx,
                                          const rill::v1::DetokenizeRequest* req,
                                          rill::v1::DetokenizeResponse* resp) {
  if (!engine_->can_generate()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "this model is an encoder: detokenization is not supported");
  }
  const tokenizer::Tokenizer& tok = engine_->tokenizer();
  for (int32_t id : req->token_ids()) {
    if (id < 0 || id >= tok.vocab_size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("token_ids: id ", id, " is outside the vocabulary"));
    }
  }
  std::vector<int32_t> ids(req->token_ids().begin(), req->token_ids().end());
  bool skip = req->has_skip_special_tokens() ? req->skip_special_tokens() : true;
  absl::StatusOr<std::string> text = tok.Decode(ids, skip);
  if (!text.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(text.status().message()));
  resp->set_text(*text);
  return grpc::Status::OK;
}

grpc::Status InferenceService::GetModelConfig(grpc::ServerContext* ctx,
                                              const rill::v1::GetModelConfigRequest* req,
                                              rill::v1::ModelConfig* resp) {
  auto c = ForwardContext(ctx);
  return WithRetryHint(ctx, engine_->stub()->GetModelConfig(c.get(), *req, resp));
}

grpc::Status InferenceService::GetServerConfig(grpc::ServerContext* ctx,
                                               const rill::v1::GetServerConfigRequest* req,
                                               rill::v1::ServerConfig* resp) {
  auto c = ForwardContext(ctx);
  grpc::Status s = engine_->stub()->GetServerConfig(c.get(), *req, resp);
  if (!s.ok()) return WithRetryHint(ctx, s);
  ReportLimits(options_.limits, engine_->max_model_len(), resp->mutable_decoding());
  // The frontend, not the token-only engine, turns tokens into text.
  resp->mutable_decoding()->set_detokenizer("incremental");
  if (options_.tracer != nullptr) resp->set_is_tracing_enabled(true);
  return s;
}

grpc::Status InferenceService::GetLoad(grpc::ServerContext* ctx, const rill::v1::GetLoadRequest* req,
                                       rill::v1::Load* resp) {
  auto c = ForwardContext(ctx);
  grpc::Status s = engine_->stub()->GetLoad(c.get(), *req, resp);
  if (!s.ok()) return WithRetryHint(ctx, s);
  resp->set_frontend_streams(open_streams_.load());
  resp->set_frontend_id(engine_->frontend_id());
  return s;
}

grpc::Status InferenceService::CheckHealth(grpc::ServerContext* ctx,
                                           const rill::v1::CheckHealthRequest* req,
                                           rill::v1::CheckHealthResponse* resp) {
  if (!engine_->serving()) {
    return WithRetryHint(ctx, grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                           engine_->unavailable_reason()));
  }
  auto c = ForwardContext(ctx);
  grpc::Status s = engine_->stub()->CheckHealth(c.get(), *req, resp);
  if (s.ok() && !resp->healthy()) {
    return WithRetryHint(ctx, grpc::Status(grpc::StatusCode::UNAVAILABLE, resp->message()));
  }
  return WithRetryHint(ctx, s);
}

}  // namespace rill::frontend
