// One client Generate stream: parses and validates each message, starts and
// aborts requests on the shared engine stream, and writes their responses.
#ifndef RILL_FRONTEND_GENERATE_SESSION_H_
#define RILL_FRONTEND_GENERATE_SESSION_H_

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "frontend/completion_stream.h"
#include "frontend/engine_client.h"
#include "frontend/request_registry.h"
#include "frontend/request_trace.h"
#include "frontend/session_options.h"
#include "rill/v1/inference.pb.h"

namespace rill::frontend {

using RawGenerateStream =
    grpc::ServerReaderWriter<rill::v1::GenerateResponse, grpc::ByteBuffer>;

// Builds the prompt token ids (and rendered text) of a start request; a
// request's own chat template only when `limits` trust it.
absl::Status BuildPrompt(const tokenizer::Tokenizer& tok, const rill::v1::StartRequest& start,
                         const RequestLimits& limits, std::vector<int32_t>* ids,
                         std::string* text);

// The state GetRequestStatus reports for a request whose last response is `final`.
rill::v1::RequestState FinalState(const rill::v1::GenerateResponse& final);

// Every request started on the stream gets exactly one finished response;
// refusals that end no request are `message_error` responses (see
// inference.proto). A request's id is released (registry and engine) before
// its finished response is queued, so the client may reuse it at once.
class GenerateSession : public std::enable_shared_from_this<GenerateSession> {
 public:
  // `pending` counts running requests over all sessions of the frontend;
  // `registry` owns the frontend's client ids. Create with make_shared.
  GenerateSession(EngineClient* engine, grpc::ServerContext* ctx,
                  RawGenerateStream* stream, const SessionOptions& options,
                  std::atomic<int>* pending, RequestRegistry* registry)
      : engine_(engine),
        ctx_(ctx),
        peer_(ctx->peer()),
        options_(options),
        pending_(pending),
        registry_(registry),
        stream_(stream) {}

  // Runs the stream to its end; the handler's return value.
  grpc::Status Run();
  // Shutdown: ends every running request with finish_reason ABORT (aborted
  // at the engine) and rejects new ones.
  void AbortForShutdown();
  // Inference/Abort: ends running request `id` with finish_reason ABORT;
  // false when it is not running on this stream.
  bool AbortRequest(const std::string& id);
  // Shutdown, after AbortForShutdown: once the queued responses are written
  // (or at `flush_deadline`), cancels the call. A client that keeps an idle
  // stream open would otherwise hold the server's shutdown until its
  // deadline, long after its requests finished.
  void EndForShutdown(absl::Time flush_deadline);

 private:
  struct Active {
    std::string engine_id;
    std::unique_ptr<CompletionStream> stream;
    std::optional<RequestTrace> trace;  // When tracing is on.
  };
  void HandleMessage(const std::string& bytes);
  void HandleStart(const rill::v1::StartRequest& start);
  void HandleAbort(const std::string& request_id);
  void OnEngineOutput(const std::string& id, const std::string& engine_id,
                      const rill::internal::EngineOutput& out);
  // Ends request `id` (never started, not running here): its one finished response.
  void SendError(const std::string& id, const absl::Status& s);
  // Refuses a message without ending any request.
  void SendMessageError(const std::string& id, const absl::Status& s);
  // A refused start: SendError, or SendMessageError when `id` runs on this
  // stream (a finished response would look like that request's end).
  void RefuseStart(const std::string& id, const absl::Status& s);
  void Send(const rill::v1::GenerateResponse& resp);
  void AbortAll();
  // Aborts running `it` at the engine and queues its finished ABORT response.
  void AbortLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Erases a running request, releasing its pending slot and its id.
  void EraseLocked(const std::string& id, rill::v1::RequestState final_state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Exports the span of running `id` (tracing on), `last` being its finished response.
  void EndTraceLocked(const std::string& id, const rill::v1::GenerateResponse& last)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes queued responses to the client; the only caller of stream_->Write
  // so a client that does not read never blocks the engine reader thread.
  void WriterLoop();
  // Ends the stream RESOURCE_EXHAUSTED when the client is not reading (see
  // SessionOptions::stall_timeout) or the send buffer hits its hard cap.
  void WatchdogLoop();
  // Why the client counts as not reading now, or "" (write_mu_ held).
  std::string StallCauseLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Sets out_bytes_, keeping the frontend's send-buffer gauge in step.
  void SetQueuedBytesLocked(int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  EngineClient* const engine_;
  grpc::ServerContext* const ctx_;
  const std::string peer_;
  const SessionOptions options_;
  std::atomic<int>* const pending_;
  RequestRegistry* const registry_;

  absl::Mutex mu_;
  absl::CondVar idle_cv_;
  absl::flat_hash_map<std::string, Active> active_ ABSL_GUARDED_BY(mu_);
  bool saw_unavailable_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex write_mu_;
  RawGenerateStream* const stream_;
  std::deque<rill::v1::GenerateResponse> out_ ABSL_GUARDED_BY(write_mu_);
  int64_t out_bytes_ ABSL_GUARDED_BY(write_mu_) = 0;   // Serialized size of out_.
  int64_t peak_out_bytes_ ABSL_GUARDED_BY(write_mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(write_mu_) = false;       // No more writes.
  bool writer_done_ ABSL_GUARDED_BY(write_mu_) = false;  // WriterLoop returned.
  bool writing_ ABSL_GUARDED_BY(write_mu_) = false;      // A popped response in Write.
  // Over the soft cap since (InfiniteFuture: not over it).
  absl::Time full_since_ ABSL_GUARDED_BY(write_mu_) = absl::InfiniteFuture();
  // The writer's current Write began (InfiniteFuture: not in a Write).
  absl::Time write_since_ ABSL_GUARDED_BY(write_mu_) = absl::InfiniteFuture();
  // Set once: the hard cap was hit (Send) or the stall timeout passed.
  std::string end_cause_ ABSL_GUARDED_BY(write_mu_);
  bool ended_ ABSL_GUARDED_BY(write_mu_) = false;  // Ended RESOURCE_EXHAUSTED.
};

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_GENERATE_SESSION_H_
