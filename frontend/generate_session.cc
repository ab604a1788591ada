#include "frontend/generate_session.h"

#include <malloc.h>

#include <algorithm>
#include <vector>

#include <glog/logging.h>
#include <grpc/grpc.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/message_text.h"
#include "base/request_id.h"
#include "base/strict_parse.h"
#include "base/tracing/span_exporter.h"
#include "frontend/chat_prompt_input.h"
#include "frontend/frontend_metrics.h"
#include "frontend/request_validator.h"
#include "tokenizer/input_processor.h"

namespace rill::frontend {

using rill::v1::GenerateResponse;

absl::Status BuildPrompt(const tokenizer::Tokenizer& tok, const rill::v1::StartRequest& start,
                         const RequestLimits& limits, std::vector<int32_t>* ids,
                         std::string* text) {
  tokenizer::PromptInput in;
  switch (start.prompt_case()) {
    case rill::v1::StartRequest::kText:
      in = tokenizer::PromptInput::Text(
          start.text(), start.has_add_special_tokens() ? start.add_special_tokens() : true);
      break;
    case rill::v1::StartRequest::kTokenIds:
      in.kind = tokenizer::PromptInput::Kind::kTokenIds;
      in.token_ids.assign(start.token_ids().ids().begin(), start.token_ids().ids().end());
      break;
    case rill::v1::StartRequest::kChat: {
      if (!start.chat().chat_template().empty() && !limits.trust_request_chat_template) {
        return absl::InvalidArgumentError(
            "chat.chat_template: this server does not render request templates "
            "(--trust_request_chat_template is off)");
      }
      absl::StatusOr<tokenizer::PromptInput> chat = ChatPromptInput(start.chat());
      if (!chat.ok()) return chat.status();
      in = std::move(*chat);
      break;
    }
    default:
      return absl::InvalidArgumentError("start.prompt: empty");
  }
  absl::StatusOr<tokenizer::ProcessedPrompt> prompt = tokenizer::InputProcessor(&tok).Process(in);
  if (!prompt.ok()) return prompt.status();
  *ids = std::move(prompt->token_ids);
  *text = std::move(prompt->text);
  return absl::OkStatus();
}

namespace {

// A stream that queued this much gives the freed memory back to the kernel
// when it ends (glibc keeps freed heap otherwise: a few never-reading
// clients would leave the frontend gigabytes larger).
constexpr int64_t kTrimAfterBytes = 4 << 20;

}  // namespace

rill::v1::RequestState FinalState(const GenerateResponse& final) {
  if (final.has_status() && final.status().code() != 0) return rill::v1::REQUEST_STATE_FAILED;
  for (const rill::v1::Completion& c : final.outputs()) {
    if (c.finish_reason() == rill::v1::FINISH_REASON_ABORT) return rill::v1::REQUEST_STATE_CANCELLED;
    if (c.finish_reason() == rill::v1::FINISH_REASON_ERROR) return rill::v1::REQUEST_STATE_FAILED;
  }
  return rill::v1::REQUEST_STATE_COMPLETED;
}

void GenerateSession::Send(const GenerateResponse& resp) {
  // Counted even when the client is gone: the request ended all the same.
  if (resp.finished() && options_.metrics != nullptr) {
    options_.metrics->RequestEnded(resp.status().code());
  }
  absl::MutexLock l(&write_mu_);
  if (closed_ || !end_cause_.empty()) return;
  const size_t cap = static_cast<size_t>(std::max(1, options_.send_buffer_messages));
  const int64_t cap_bytes = std::max<int64_t>(1, options_.send_buffer_bytes);
  SetQueuedBytesLocked(out_bytes_ + static_cast<int64_t>(resp.ByteSizeLong()));
  out_.push_back(resp);
  peak_out_bytes_ = std::max(peak_out_bytes_, out_bytes_);
  // Twice the soft cap is a hard bound on memory: the watchdog ends the
  // stream at once. One response alone never counts (it may be large).
  if (end_cause_.empty() &&
      (out_.size() >= 2 * cap || (out_bytes_ > 2 * cap_bytes && out_.size() > 1))) {
    end_cause_ = absl::StrCat("its send buffer reached twice its limit (", out_.size(),
                              " responses, ", out_bytes_, " bytes queued; limits ", cap,
                              " responses (--client_send_buffer), ", cap_bytes,
                              " bytes (--client_send_buffer_bytes))");
  }
  // Over the soft cap the stall clock runs.
  if ((out_.size() >= cap || out_bytes_ >= cap_bytes) && full_since_ == absl::InfiniteFuture()) {
    full_since_ = absl::Now();
  }
}

void GenerateSession::SetQueuedBytesLocked(int64_t bytes) {
  if (options_.metrics != nullptr) options_.metrics->AddSendBufferBytes(bytes - out_bytes_);
  out_bytes_ = bytes;
}

void GenerateSession::WriterLoop() {
  struct Done {
    GenerateSession* self;
    ~Done() {
      absl::MutexLock l(&self->write_mu_);
      self->writer_done_ = true;
      self->write_since_ = absl::InfiniteFuture();
    }
  } done{this};
  const size_t cap = static_cast<size_t>(std::max(1, options_.send_buffer_messages));
  const int64_t cap_bytes = std::max<int64_t>(1, options_.send_buffer_bytes);
  while (true) {
    GenerateResponse resp;
    {
      absl::MutexLock l(&write_mu_);
      write_since_ = absl::InfiniteFuture();
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_) {
        return !out_.empty() || closed_;
      };
      write_mu_.Await(absl::Condition(&ready));
      if (out_.empty() || ended_) return;
      resp = std::move(out_.front());
      out_.pop_front();
      SetQueuedBytesLocked(out_bytes_ - std::min<int64_t>(out_bytes_, resp.ByteSizeLong()));
      if (out_.size() < cap && out_bytes_ < cap_bytes) full_since_ = absl::InfiniteFuture();
      write_since_ = absl::Now();
      writing_ = true;
    }
    const bool written = stream_->Write(resp);
    absl::MutexLock l(&write_mu_);
    writing_ = false;
    if (!written) {
      closed_ = true;
      out_.clear();
      SetQueuedBytesLocked(0);
      return;
    }
  }
}

std::string GenerateSession::StallCauseLocked(absl::Time now) {
  if (!end_cause_.empty()) return end_cause_;
  const absl::Duration t = options_.stall_timeout;
  if (now - write_since_ >= t) {
    return absl::StrCat("no response could be written to it for ", absl::FormatDuration(t),
                        " (--client_stall_timeout_ms; ", out_.size(), " more queued)");
  }
  if (now - full_since_ >= t) {
    return absl::StrCat("its send buffer stayed over its limit (",
                        options_.send_buffer_messages, " responses or ",
                        options_.send_buffer_bytes, " bytes) for ", absl::FormatDuration(t),
                        " (--client_stall_timeout_ms)");
  }
  return "";
}

void GenerateSession::WatchdogLoop() {
  std::string cause;
  {
    absl::MutexLock l(&write_mu_);
    while (!writer_done_) {
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_) {
        return writer_done_ || !end_cause_.empty();
      };
      write_mu_.AwaitWithTimeout(absl::Condition(&wake), absl::Milliseconds(100));
      if (writer_done_) return;
      cause = StallCauseLocked(absl::Now());
      if (!cause.empty()) break;
    }
    if (cause.empty()) return;
    end_cause_ = cause;
    ended_ = true;
    closed_ = true;
    out_.clear();
    SetQueuedBytesLocked(0);
  }
  if (options_.metrics != nullptr) options_.metrics->SlowClientTerminated();
  const std::string message =
      absl::StrCat("client was not reading its Generate stream: ", cause, "; requests aborted");
  LOG(WARNING) << "ending a Generate stream from " << peer_ << " RESOURCE_EXHAUSTED: " << message;
  AbortAll();
  // Sends this status to the client at once (trailers are not held behind
  // the unread responses) and unblocks the writer's Write and the handler's
  // Read. TryCancel would say CANCELLED "Cancelled on the server side".
  grpc_call_cancel_with_status(ctx_->c_call(), GRPC_STATUS_RESOURCE_EXHAUSTED, message.c_str(),
                               nullptr);
}

void GenerateSession::EraseLocked(const std::string& id, rill::v1::RequestState final_state) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  registry_->Release(id, it->second.engine_id, final_state);
  active_.erase(it);
  if (pending_ != nullptr) pending_->fetch_sub(1);
  idle_cv_.SignalAll();
}

void GenerateSession::EndTraceLocked(const std::string& id, const GenerateResponse& last) {
  auto it = active_.find(id);
  if (it == active_.end() || !it->second.trace.has_value()) return;
  for (base::tracing::Span& span : EndRequestTrace(std::move(*it->second.trace), last)) {
    options_.tracer->Export(std::move(span));
  }
  it->second.trace.reset();
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

void GenerateSession::SendMessageError(const std::string& id, const absl::Status& s) {
  GenerateResponse resp;
  resp.set_request_id(id);
  resp.mutable_message_error()->set_code(static_cast<int>(s.code()));
  resp.mutable_message_error()->set_message(std::string(s.message()));
  Send(resp);
}

void GenerateSession::RefuseStart(const std::string& id, const absl::Status& s) {
  bool running;
  {
    absl::MutexLock l(&mu_);
    running = active_.contains(id);
  }
  // Only this (the reader) thread adds to active_, so `running` stays true
  // or turns false, never the other way, until we return.
  if (running) {
    SendMessageError(id, s);
  } else {
    SendError(id, s);
  }
}

void GenerateSession::HandleMessage(const std::string& bytes) {
  rill::v1::GenerateRequest req;
  absl::Status s = base::ParseStrict(bytes, &req);
  if (!s.ok()) {
    bool is_start = false;
    std::string id = PeekRequestId(bytes, &is_start);
    if (is_start && !id.empty() && id.size() <= kMaxRequestIdBytes) {
      RefuseStart(id, s);
    } else {
      SendMessageError(id.size() <= kMaxRequestIdBytes ? id : "", s);
    }
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
      SendMessageError("", absl::InvalidArgumentError("action: set start or abort"));
  }
}

void GenerateSession::HandleStart(const rill::v1::StartRequest& start) {
  const absl::Time received = absl::Now();
  if (absl::Status s = ValidateRequestIdLength(start.request_id()); !s.ok()) {
    SendMessageError("", s);
    return;
  }
  std::string id = start.request_id().empty() ? engine_->NewRequestId() : start.request_id();
  {
    absl::MutexLock l(&mu_);
    if (active_.contains(id)) {
      // A finished response here would look like the running request's end.
      GenerateResponse resp;
      resp.set_request_id(id);
      resp.mutable_message_error()->set_code(grpc::StatusCode::ALREADY_EXISTS);
      resp.mutable_message_error()->set_message(
          absl::StrCat("request_id '", ShortForMessage(id),
                       "' is already running on this stream; that request goes on"));
      Send(resp);
      return;
    }
  }
  absl::Status s = ValidateStart(start, options_.limits);
  std::vector<int32_t> ids;
  std::string text;
  if (s.ok() && !engine_->can_generate()) {
    s = absl::UnimplementedError(
        "this model is an encoder (embeddings only): Generate is not supported; use Encode");
  }
  if (s.ok()) {
    const absl::Time tokenize_start = absl::Now();
    s = BuildPrompt(engine_->tokenizer(), start, options_.limits, &ids, &text);
    if (options_.metrics != nullptr) {
      options_.metrics->ObserveTokenization(absl::Now() - tokenize_start);
    }
  }
  if (s.ok() && ids.empty()) s = absl::InvalidArgumentError("prompt: no tokens");
  if (s.ok()) s = ValidatePromptLength(ids.size(), engine_->max_model_len(), options_.limits);
  if (!s.ok()) {
    SendError(id, s);  // Not running here (checked above; only this thread adds).
    return;
  }
  const std::string engine_id = engine_->NewEngineId(id);
  {
    absl::MutexLock l(&mu_);
    if (shutting_down_) {
      s = absl::UnavailableError("frontend shutting down; retry on another frontend");
    } else if (options_.max_pending_requests > 0 && pending_ != nullptr &&
               pending_->fetch_add(1) >= options_.max_pending_requests) {
      pending_->fetch_sub(1);
      s = absl::ResourceExhaustedError(absl::StrCat(
          "this frontend already has ", options_.max_pending_requests,
          " running requests (--max_pending_requests); retry later"));
    } else if (!registry_->Claim(id, {weak_from_this(), peer_, engine_id})) {
      if (pending_ != nullptr && options_.max_pending_requests > 0) pending_->fetch_sub(1);
      s = absl::AlreadyExistsError(absl::StrCat(
          "request_id '", ShortForMessage(id),
          "' is already running on this frontend (request ids are scoped per frontend)"));
    } else {
      if (pending_ != nullptr && options_.max_pending_requests <= 0) pending_->fetch_add(1);
      active_[id] = Active{engine_id, std::make_unique<CompletionStream>(
                                          &engine_->tokenizer(), start, id, ids, text)};
    }
  }
  if (!s.ok()) {
    SendError(id, s);
    return;
  }
  rill::internal::EngineStart es;
  es.set_request_id(engine_id);
  for (int32_t t : ids) es.add_prompt_token_ids(t);
  *es.mutable_sampling() = start.sampling();
  es.set_lora_name(start.lora_name());
  es.set_priority(start.priority());
  *es.mutable_trace_headers() = start.trace_headers();
  es.set_arrival_time(NowSeconds());
  if (options_.tracer != nullptr) {
    RequestTrace trace = BeginRequestTrace(id, start, *ctx_, received, &es);
    absl::MutexLock l(&mu_);
    if (auto it = active_.find(id); it != active_.end()) it->second.trace = std::move(trace);
  }
  std::weak_ptr<GenerateSession> weak = weak_from_this();
  s = engine_->StartRequest(es, [weak, id, engine_id](const rill::internal::EngineOutput& out) {
    if (auto self = weak.lock()) self->OnEngineOutput(id, engine_id, out);
  });
  if (!s.ok()) {
    {
      absl::MutexLock l(&mu_);
      EraseLocked(id, rill::v1::REQUEST_STATE_FAILED);
    }
    SendError(id, s);
  }
}

void GenerateSession::OnEngineOutput(const std::string& id, const std::string& engine_id,
                                     const rill::internal::EngineOutput& out) {
  // Holding mu_ while queueing keeps each request's responses in order.
  absl::MutexLock l(&mu_);
  auto it = active_.find(id);
  // A late output of an earlier request under the same client id is dropped.
  if (it == active_.end() || it->second.engine_id != engine_id) return;
  if (out.has_status() && out.status().code() == grpc::StatusCode::UNAVAILABLE) {
    saw_unavailable_ = true;
  }
  const bool traced = it->second.trace.has_value();
  const absl::Time detokenize_start = traced ? absl::Now() : absl::InfinitePast();
  CompletionStream::Result r = it->second.stream->OnOutput(out);
  if (traced) {
    int64_t tokens = 0;
    for (const rill::internal::CompletionDelta& d : out.outputs()) tokens += d.token_ids_size();
    it->second.trace->RecordDetokenize(detokenize_start, absl::Now(), tokens);
  }
  if (r.abort_engine) engine_->AbortRequest(engine_id);
  if (r.done) EndTraceLocked(id, r.response ? *r.response : GenerateResponse());
  // The id is free before the client can read the finished response.
  if (r.done) EraseLocked(id, r.response ? FinalState(*r.response) : rill::v1::REQUEST_STATE_COMPLETED);
  if (r.response) Send(*r.response);
}

void GenerateSession::AbortLocked(const std::string& id) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  engine_->AbortRequest(it->second.engine_id);
  GenerateResponse resp = it->second.stream->Finish(rill::v1::FINISH_REASON_ABORT, 0, "");
  EndTraceLocked(id, resp);
  EraseLocked(id, rill::v1::REQUEST_STATE_CANCELLED);
  Send(resp);
}

void GenerateSession::HandleAbort(const std::string& request_id) {
  if (absl::Status s = ValidateRequestIdLength(request_id); !s.ok()) {
    SendMessageError("", s);
    return;
  }
  absl::MutexLock l(&mu_);
  if (!active_.contains(request_id)) {
    GenerateResponse resp;
    resp.set_request_id(request_id);
    resp.mutable_message_error()->set_code(grpc::StatusCode::NOT_FOUND);
    resp.mutable_message_error()->set_message(absl::StrCat(
        "abort: no unfinished request '", ShortForMessage(request_id), "' on this stream"));
    Send(resp);
    return;
  }
  AbortLocked(request_id);
}

bool GenerateSession::AbortRequest(const std::string& id) {
  absl::MutexLock l(&mu_);
  if (!active_.contains(id)) return false;
  AbortLocked(id);
  return true;
}

void GenerateSession::AbortForShutdown() {
  absl::MutexLock l(&mu_);
  shutting_down_ = true;
  std::vector<std::string> ids;
  for (const auto& [id, a] : active_) ids.push_back(id);
  for (const std::string& id : ids) AbortLocked(id);
}

void GenerateSession::EndForShutdown(absl::Time flush_deadline) {
  {
    absl::MutexLock l(&write_mu_);
    auto flushed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_) {
      return (out_.empty() && !writing_) || writer_done_;
    };
    write_mu_.AwaitWithDeadline(absl::Condition(&flushed), flush_deadline);
  }
  ctx_->TryCancel();
}

void GenerateSession::AbortAll() {
  absl::MutexLock l(&mu_);
  for (auto& [id, a] : active_) {
    engine_->AbortRequest(a.engine_id);
    registry_->Release(id, a.engine_id, rill::v1::REQUEST_STATE_CANCELLED);
  }
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
  {
    // The writer drains what is queued (unless the call is gone) and exits.
    absl::MutexLock l(&write_mu_);
    closed_ = true;
  }
  writer.join();
  watchdog.join();
  bool ended;
  std::string cause;
  int64_t peak;
  {
    absl::MutexLock l(&write_mu_);
    ended = ended_;
    cause = end_cause_;
    peak = peak_out_bytes_;
    out_.clear();
    out_.shrink_to_fit();
    SetQueuedBytesLocked(0);
  }
  if (peak >= kTrimAfterBytes) malloc_trim(0);
  if (ended) {
    // The client already got this status (WatchdogLoop); the same here.
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("client was not reading its Generate stream: ", cause,
                                     "; requests aborted"));
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
