#include "engine/service/generate_stream.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include <glog/logging.h>
#include <grpc/grpc.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/engine_session.h"
#include "base/message_text.h"
#include "base/request_id.h"
#include "engine/service/proto_convert.h"
#include "engine/service/request_spans.h"
#include "engine/service/status_convert.h"

namespace rill::engine::service {
namespace {

using rill::internal::EngineOutput;
using rill::internal::EngineRequest;

// Outputs queued for one stream whose peer stopped reading (a stalled
// frontend) before the stream is ended RESOURCE_EXHAUSTED and its requests
// aborted: a bound on memory, far above what a reading frontend leaves.
constexpr size_t kMaxQueuedBytes = 64 << 20;
constexpr size_t kMaxQueuedOutputs = 1 << 20;

// Shared by the handler thread, the writer thread and engine callbacks
// (which may outlive the handler, hence shared_ptr). Ids here are the
// client's; the engine knows them as base::ScopedRequestId(session, id).
struct StreamState {
  std::string session;  // The stream's `rill-session` metadata; "" = engine-wide ids.
  absl::Mutex mu;
  std::deque<EngineOutput> queue ABSL_GUARDED_BY(mu);
  absl::flat_hash_set<std::string> live ABSL_GUARDED_BY(mu);  // Started, not finished.
  size_t queued_bytes ABSL_GUARDED_BY(mu) = 0;
  bool done ABSL_GUARDED_BY(mu) = false;          // No more outputs will be queued.
  bool write_failed ABSL_GUARDED_BY(mu) = false;  // The client is gone (or overflowed).
  // The call, while its handler runs (null after): cancelled on overflow.
  grpc::ServerContext* context ABSL_GUARDED_BY(mu) = nullptr;

  void Push(EngineOutput out) {
    absl::MutexLock lock(&mu);
    if (out.finished()) live.erase(out.request_id());
    EnqueueLocked(std::move(out));
  }

  void EnqueueLocked(EngineOutput out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (write_failed) return;
    queued_bytes += out.ByteSizeLong();
    queue.push_back(std::move(out));
    if (queued_bytes <= kMaxQueuedBytes && queue.size() <= kMaxQueuedOutputs) return;
    LOG(WARNING) << "engine stream of session '" << session << "': " << queue.size()
                 << " outputs (" << queued_bytes << " bytes) queued, its peer is not reading; "
                 << "ending the stream";
    write_failed = true;
    queue.clear();
    queued_bytes = 0;
    // Unblocks the handler's Read and the writer's Write; the peer sees this
    // status (TryCancel would say CANCELLED).
    if (context != nullptr) {
      grpc_call_cancel_with_status(context->c_call(), GRPC_STATUS_RESOURCE_EXHAUSTED,
                                   "engine stream: the peer was not reading its outputs; "
                                   "requests aborted",
                                   nullptr);
    }
  }
};

void PushError(StreamState* state, const std::string& id, const absl::Status& status) {
  EngineOutput out;
  out.set_request_id(id);
  out.set_finished(true);
  *out.mutable_status() = ToProtoStatus(status);
  absl::MutexLock lock(&state->mu);
  state->EnqueueLocked(std::move(out));
}

void WriterLoop(StreamState* state,
                grpc::ServerReaderWriter<EngineOutput, EngineRequest>* stream) {
  while (true) {
    EngineOutput out;
    {
      absl::MutexLock lock(&state->mu);
      auto ready = [state]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) {
        return !state->queue.empty() || state->done;
      };
      state->mu.Await(absl::Condition(&ready));
      if (state->queue.empty()) return;  // done and drained.
      out = std::move(state->queue.front());
      state->queue.pop_front();
      state->queued_bytes -= std::min(state->queued_bytes, out.ByteSizeLong());
    }
    if (!stream->Write(out)) {
      absl::MutexLock lock(&state->mu);
      state->write_failed = true;
      state->queue.clear();
      state->queued_bytes = 0;
      return;
    }
  }
}

absl::Status StartRequest(EngineHost* host, const std::shared_ptr<StreamState>& state,
                          const rill::internal::EngineStart& start) {
  const std::string& id = start.request_id();
  if (id.empty()) return absl::InvalidArgumentError("request_id is empty");
  if (absl::Status s = ValidateRequestIdLength(id); !s.ok()) return s;
  if (absl::Status s = host->Serving(); !s.ok()) return s;
  engine::AsyncEngine* engine = host->engine();
  if (start.prompt_token_ids().empty()) return absl::InvalidArgumentError("the prompt is empty");
  absl::StatusOr<engine::SamplingParams> params = FromProto(start.sampling());
  if (!params.ok()) return params.status();
  const int limit = host->options().max_waiting_requests;
  if (limit > 0 && engine->GetStats().num_waiting >= limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the engine queue is full (", limit, " waiting requests); retry later"));
  }
  {
    absl::MutexLock lock(&state->mu);
    if (!state->live.insert(id).second) {
      return absl::AlreadyExistsError(absl::StrCat("request '", ShortForMessage(id), "' is already running"));
    }
  }
  std::vector<int32_t> prompt(start.prompt_token_ids().begin(), start.prompt_token_ids().end());
  absl::Time arrival = start.arrival_time() > 0
                           ? absl::UnixEpoch() + absl::Seconds(start.arrival_time())
                           : absl::Now();
  std::weak_ptr<StreamState> weak = state;
  std::shared_ptr<RequestSpans> spans = RequestSpans::Begin(host->options().tracer, start);
  absl::Status status = engine->GenerateWithCallback(
      std::move(prompt), *params, base::ScopedRequestId(state->session, id),
      [weak, id, spans](const engine::RequestOutput& out) {
        if (spans != nullptr) spans->OnOutput(out);  // Even when the stream is gone.
        std::shared_ptr<StreamState> s = weak.lock();
        if (s == nullptr) return;
        EngineOutput eo = ToEngineOutput(out);
        eo.set_request_id(id);  // The client's id, not the scoped one.
        s->Push(std::move(eo));
      },
      start.priority(), arrival, start.lora_name());
  if (!status.ok()) {
    absl::MutexLock lock(&state->mu);
    state->live.erase(id);
  }
  return status;
}

void AbortAll(EngineHost* host, StreamState* state) {
  std::vector<std::string> ids;
  {
    absl::MutexLock lock(&state->mu);
    ids.assign(state->live.begin(), state->live.end());
  }
  engine::AsyncEngine* engine = host->engine();
  if (engine == nullptr) return;
  for (const std::string& id : ids) (void)engine->Abort(base::ScopedRequestId(state->session, id));
  if (!ids.empty()) LOG(INFO) << "stream ended: aborted " << ids.size() << " request(s)";
}

}  // namespace

std::string SessionOf(const grpc::ServerContext& context) {
  const auto& md = context.client_metadata();
  auto it = md.find(base::kEngineSessionMetadata);
  return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
}

grpc::Status ServeGenerateStream(EngineHost* host, grpc::ServerContext* context,
                                 grpc::ServerReaderWriter<EngineOutput, EngineRequest>* stream) {
  auto state = std::make_shared<StreamState>();
  state->session = SessionOf(*context);
  {
    absl::MutexLock lock(&state->mu);
    state->context = context;
  }
  std::thread writer([&] { WriterLoop(state.get(), stream); });
  EngineRequest request;
  while (stream->Read(&request)) {
    if (request.has_start()) {
      absl::Status s = StartRequest(host, state, request.start());
      // An over-long id is not echoed back (the message names the limit).
      if (!s.ok()) {
        const std::string& id = request.start().request_id();
        PushError(state.get(), id.size() <= kMaxRequestIdBytes ? id : "", s);
      }
    } else if (request.has_abort()) {
      engine::AsyncEngine* engine = host->engine();
      // An abort racing the request's end is normal: NotFound is ignored.
      if (engine != nullptr) {
        (void)engine->Abort(base::ScopedRequestId(state->session, request.abort().request_id()));
      }
    }
  }
  // Half-close lets running requests finish; a cancelled call or a broken
  // writer aborts them.
  while (true) {
    bool broken = context->IsCancelled();
    {
      absl::MutexLock lock(&state->mu);
      broken = broken || state->write_failed;
      if (state->live.empty()) break;
      if (!broken) {
        auto empty = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) {
          return state->live.empty() || state->write_failed;
        };
        state->mu.AwaitWithTimeout(absl::Condition(&empty), absl::Milliseconds(50));
        continue;
      }
    }
    AbortAll(host, state.get());
    break;
  }
  {
    absl::MutexLock lock(&state->mu);
    state->done = true;
    state->context = nullptr;
  }
  writer.join();
  return grpc::Status::OK;
}

}  // namespace rill::engine::service
