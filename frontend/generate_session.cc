#include "frontend/generate_session.h"

#include <algorithm>
#include <vector>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "base/strict_parse.h"
#include "frontend/request_validator.h"

namespace rill::frontend {

using rill::v1::GenerateResponse;

absl::Status BuildPrompt(const tokenizer::Tokenizer& tok,
                         const rill::v1::StartRequest& start,
                         std::vector<int32_t>* ids, std::string* text) {
  bool add_special = start.has_add_special_tokens() ? start.add_special_tokens() : true;
  switch (start.prompt_case()) {
    case rill::v1::StartRequest::kText:
      *ids = tok.Encode(start.text(), add_special);
      return absl::OkStatus();
    case rill::v1::StartRequest::kTokenIds:
      for (int32_t id : start.token_ids().ids()) {
        if (id < 0 || id >= tok.vocab_size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "token_ids: id ", id, " is outside the vocabulary [0, ", tok.vocab_size(), ")"));
        }
        ids->push_back(id);
      }
      return absl::OkStatus();
    case rill::v1::StartRequest::kChat: {
      if (start.chat().messages().empty()) {
        return absl::InvalidArgumentError("chat.messages: no messages (give at least one)");
      }
      std::vector<tokenizer::ChatMessage> msgs;
      for (const auto& m : start.chat().messages()) msgs.push_back({m.role(), m.content()});
      bool gen = start.chat().has_add_generation_prompt() ? start.chat().add_generation_prompt() : true;
      absl::StatusOr<std::string> rendered = tok.ApplyChatTemplate(msgs, gen);
      if (!rendered.ok()) {
        if (absl::IsUnimplemented(rendered.status())) {
          return absl::FailedPreconditionError(absl::StrCat(
              "chat: the model's chat template is not supported: ", rendered.status().message()));
        }
        return absl::InvalidArgumentError(absl::StrCat("chat: ", rendered.status().message()));
      }
      *text = *rendered;
      *ids = tok.Encode(*text, /*add_special_tokens=*/false);
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError("start.prompt: empty");
  }
}

void GenerateSession::Send(const GenerateResponse& resp) {
  absl::MutexLock l(&write_mu_);
  if (closed_) return;
  const size_t cap = static_cast<size_t>(std::max(1, options_.send_buffer_messages));
  // Over the soft cap the stall clock runs; twice the cap is a hard bound on
  // memory: the stream is ended at once.
  if (out_.size() >= 2 * cap) {
    full_since_ = absl::InfinitePast();
    return;
  }
  out_.push_back(resp);
  if (out_.size() >= cap && full_since_ == absl::InfiniteFuture()) full_since_ = absl::Now();
}

void GenerateSession::WriterLoop() {
  struct Done {
    GenerateSession* self;
    ~Done() {
      absl::MutexLock l(&self->write_mu_);
      self->writer_done_ = true;
    }
  } done{this};
  const size_t cap = static_cast<size_t>(std::max(1, options_.send_buffer_messages));
  while (true) {
    GenerateResponse resp;
    {
      absl::MutexLock l(&write_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_) {
        return !out_.empty() || closed_;
      };
      write_mu_.Await(absl::Condition(&ready));
      if (out_.empty() || stalled_) return;
      resp = std::move(out_.front());
      out_.pop_front();
      if (out_.size() < cap && full_since_ != absl::InfinitePast()) {
        full_since_ = absl::InfiniteFuture();
      }
    }
    if (!stream_->Write(resp)) {
      absl::MutexLock l(&write_mu_);
      closed_ = true;
      out_.clear();
      return;
    }
  }
}

void GenerateSession::WatchdogLoop() {
  while (true) {
    {
      absl::MutexLock l(&write_mu_);
      if (writer_done_) return;
      write_mu_.AwaitWithTimeout(absl::Condition(&writer_done_), absl::Milliseconds(100));
      if (writer_done_) return;
      if (absl::Now() - full_since_ < options_.stall_timeout) continue;
      stalled_ = true;
      closed_ = true;
      out_.clear();
    }
    LOG(WARNING) << "client stream not reading: send buffer full for over "
                 << options_.stall_timeout << "; aborting its requests";
    AbortAll();
    // Unblocks the writer's Write and the handler's Read.
    ctx_->TryCancel();
    return;
  }
}

void GenerateSession::EraseLocked(const std::string& id) {
  if (active_.erase(id) > 0 && pending_ != nullptr) pending_->fetch_sub(1);
  idle_cv_.SignalAll();
}

void GenerateSession::SendError(const std::string& id, const absl::Status& s) {
  GenerateResponse resp;
  resp.set_request_id(id);
  resp.set_finished(true);
  resp.mutable_status()->set_code(static_cast<int>(s.code()));
  resp.mutable_status()->set_message(std::string(s.message()));
  if (s.code() == absl::StatusCode::kUnavailable) {
    absl::MutexLock l(&mu_);
    saw_unavailable_ = true;
  }
  Send(resp);
}

void GenerateSession::HandleMessage(const std::string& bytes) {
  rill::v1::GenerateRequest req;
  absl::Status s = base::ParseStrict(bytes, &req);
  if (!s.ok()) {
    SendError(PeekRequestId(bytes), s);
    return;
  }
  switch (req.action_case()) {
    case rill::v1::GenerateRequest::kStart:
      HandleStart(req.start());
      break;
    case rill::v1::GenerateRequest::kAbort:
      HandleAbort(req.abort().request_id());
      break;
    default:
      SendError("", absl::InvalidArgumentError("action: set start or abort"));
  }
}

void GenerateSession::HandleStart(const rill::v1::StartRequest& start) {
  std::string id = start.request_id().empty() ? engine_->NewRequestId() : start.request_id();
  absl::Status s = ValidateStart(start, options_.limits);
  std::vector<int32_t> ids;
  std::string text;
  if (s.ok() && !engine_->can_generate()) {
    s = absl::UnimplementedError(
        "this model is an encoder (embeddings only): Generate is not supported; use Encode");
  }
  if (s.ok()) s = BuildPrompt(engine_->tokenizer(), start, &ids, &text);
  if (s.ok() && ids.empty()) s = absl::InvalidArgumentError("prompt: no tokens");
  if (s.ok()) s = ValidatePromptLength(ids.size(), engine_->max_model_len(), options_.limits);
  if (!s.ok()) {
    SendError(id, s);
    return;
  }
  {
    absl::MutexLock l(&mu_);
    if (shutting_down_) {
      s = absl::UnavailableError("frontend shutting down; retry on another frontend");
    } else if (active_.contains(id)) {
      s = absl::AlreadyExistsError(absl::StrCat("request_id ", id, " is already running on this stream"));
    } else if (options_.max_pending_requests > 0 && pending_ != nullptr &&
               pending_->fetch_add(1) >= options_.max_pending_requests) {
      pending_->fetch_sub(1);
      s = absl::ResourceExhaustedError(absl::StrCat(
          "this frontend already has ", options_.max_pending_requests,
          " running requests (--max_pending_requests); retry later"));
    } else {
      if (pending_ != nullptr && options_.max_pending_requests <= 0) pending_->fetch_add(1);
      active_[id] = std::make_unique<CompletionStream>(&engine_->tokenizer(), start, id, ids, text);
    }
  }
  if (!s.ok()) {
    SendError(id, s);
    return;
  }
  rill::internal::EngineStart es;
  es.set_request_id(id);
  for (int32_t t : ids) es.add_prompt_token_ids(t);
  *es.mutable_sampling() = start.sampling();
  es.set_lora_name(start.lora_name());
  es.set_priority(start.priority());
  *es.mutable_trace_headers() = start.trace_headers();
  es.set_arrival_time(NowSeconds());
  std::weak_ptr<GenerateSession> weak = weak_from_this();
  s = engine_->StartRequest(es, [weak, id](const rill::internal::EngineOutput& out) {
    if (auto self = weak.lock()) self->OnEngineOutput(id, out);
  });
  if (!s.ok()) {
    {
      absl::MutexLock l(&mu_);
      EraseLocked(id);
    }
    SendError(id, s);
  }
}

void GenerateSession::OnEngineOutput(const std::string& id,
                                     const rill::internal::EngineOutput& out) {
  // Holding mu_ while writing keeps each request's responses in order.
  absl::MutexLock l(&mu_);
  auto it = active_.find(id);
  if (it == active_.end()) return;
  if (out.has_status() && out.status().code() == grpc::StatusCode::UNAVAILABLE) {
    saw_unavailable_ = true;
  }
  CompletionStream::Result r = it->second->OnOutput(out);
  if (r.response) Send(*r.response);
  if (r.done) EraseLocked(id);
  if (r.abort_engine) engine_->AbortRequest(id);
}

void GenerateSession::HandleAbort(const std::string& request_id) {
  absl::MutexLock l(&mu_);
  auto it = active_.find(request_id);
  if (it == active_.end()) {
    GenerateResponse resp;
    resp.set_request_id(request_id);
    resp.set_finished(true);
    resp.mutable_status()->set_code(grpc::StatusCode::NOT_FOUND);
    resp.mutable_status()->set_message(
        absl::StrCat("abort: no running request ", request_id, " on this stream"));
    Send(resp);
    return;
  }
  engine_->AbortRequest(request_id);
  Send(it->second->Finish(rill::v1::FINISH_REASON_ABORT, 0, ""));
  EraseLocked(request_id);
}

void GenerateSession::AbortForShutdown() {
  absl::MutexLock l(&mu_);
  shutting_down_ = true;
  for (auto& [id, cs] : active_) {
    engine_->AbortRequest(id);
    Send(cs->Finish(rill::v1::FINISH_REASON_ABORT, 0, ""));
  }
  if (pending_ != nullptr) pending_->fetch_sub(static_cast<int>(active_.size()));
  active_.clear();
  idle_cv_.SignalAll();
}

void GenerateSession::AbortAll() {
  absl::MutexLock l(&mu_);
  for (auto& [id, cs] : active_) engine_->AbortRequest(id);
  if (pending_ != nullptr) pending_->fetch_sub(static_cast<int>(active_.size()));
  active_.clear();
  idle_cv_.SignalAll();
}

grpc::Status GenerateSession::Run() {
  std::thread writer([this] { WriterLoop(); });
  std::thread watchdog([this] { WatchdogLoop(); });
  grpc::ByteBuffer buf;
  while (stream_->Read(&buf)) {
    HandleMessage(base::ByteBufferToString(buf));
    buf.Clear();
  }
  // Half-closed: let running requests finish unless the call is cancelled.
  while (!ctx_->IsCancelled()) {
    absl::MutexLock l(&mu_);
    if (active_.empty()) break;
    idle_cv_.WaitWithTimeout(&mu_, absl::Milliseconds(100));
  }
  bool cancelled = ctx_->IsCancelled();
  LOG(INFO) << "generate stream ended (cancelled=" << cancelled << ")";
  AbortAll();
  bool stalled;
  {
    // The writer drains what is queued (unless the call is gone) and exits.
    absl::MutexLock l(&write_mu_);
    closed_ = true;
  }
  writer.join();
  watchdog.join();
  {
    absl::MutexLock l(&write_mu_);
    stalled = stalled_;
  }
  if (stalled) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "client was not reading its Generate stream: send buffer full for over " +
                            absl::FormatDuration(options_.stall_timeout) + "; requests aborted");
  }
  bool unavailable;
  {
    absl::MutexLock l(&mu_);
    unavailable = saw_unavailable_;
  }
  if (unavailable) {
    ctx_->AddTrailingMetadata("grpc-retry-pushback-ms",
                              std::to_string(EngineClient::kRetryPushbackMs));
  }
  if (cancelled) {
    if (ctx_->deadline() <= std::chrono::system_clock::now()) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline exceeded; requests aborted");
    }
    return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled; requests aborted");
  }
  return grpc::Status::OK;
}

}  // namespace rill::frontend
