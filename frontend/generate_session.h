// One client Generate stream: parses and validates each message, starts and
// aborts requests on the shared engine stream, and writes their responses.
#ifndef RILL_FRONTEND_GENERATE_SESSION_H_
#define RILL_FRONTEND_GENERATE_SESSION_H_

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "frontend/completion_stream.h"
#include "frontend/engine_client.h"
#include "frontend/session_options.h"
#include "rill/v1/inference.pb.h"

namespace rill::frontend {

using RawGenerateStream =
    grpc::ServerReaderWriter<rill::v1::GenerateResponse, grpc::ByteBuffer>;

// Builds the prompt token ids (and rendered text) of a start request.
absl::Status BuildPrompt(const tokenizer::Tokenizer& tok,
                         const rill::v1::StartRequest& start,
                         std::vector<int32_t>* ids, std::string* text);

class GenerateSession : public std::enable_shared_from_this<GenerateSession> {
 public:
  // `pending` counts running requests over all sessions of the frontend.
  GenerateSession(EngineClient* engine, grpc::ServerContext* ctx,
                  RawGenerateStream* stream, const SessionOptions& options,
                  std::atomic<int>* pending)
      : engine_(engine), ctx_(ctx), options_(options), pending_(pending), stream_(stream) {}

  // Runs the stream to its end; the handler's return value.
  grpc::Status Run();
  // Shutdown: ends every running request with finish_reason ABORT (aborted
  // at the engine) and rejects new ones.
  void AbortForShutdown();
  // Shutdown, after AbortForShutdown: once the queued responses are written
  // (or at `flush_deadline`), cancels the call. A client that keeps an idle
  // stream open would otherwise hold the server's shutdown until its
  // deadline, long after its requests finished.
  void EndForShutdown(absl::Time flush_deadline);

 private:
  void HandleMessage(const std::string& bytes);
  void HandleStart(const rill::v1::StartRequest& start);
  void HandleAbort(const std::string& request_id);
  void OnEngineOutput(const std::string& id, const rill::internal::EngineOutput& out);
  void SendError(const std::string& id, const absl::Status& s);
  void Send(const rill::v1::GenerateResponse& resp);
  void AbortAll();
  // Erases a running request (mu_ held) and releases its pending slot.
  void EraseLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes queued responses to the client; the only caller of stream_->Write
  // so a client that does not read never blocks the engine reader thread.
  void WriterLoop();
  // Ends the stream when the send buffer stays full past the stall timeout.
  void WatchdogLoop();

  EngineClient* const engine_;
  grpc::ServerContext* const ctx_;
  const SessionOptions options_;
  std::atomic<int>* const pending_;

  absl::Mutex mu_;
  absl::CondVar idle_cv_;
  absl::flat_hash_map<std::string, std::unique_ptr<CompletionStream>> active_
      ABSL_GUARDED_BY(mu_);
  bool saw_unavailable_ ABSL_GUARDED_BY(mu_) = false;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex write_mu_;
  RawGenerateStream* const stream_;
  std::deque<rill::v1::GenerateResponse> out_ ABSL_GUARDED_BY(write_mu_);
  bool closed_ ABSL_GUARDED_BY(write_mu_) = false;    // No more writes.
  bool stalled_ ABSL_GUARDED_BY(write_mu_) = false;      // Ended: client not reading.
  bool writer_done_ ABSL_GUARDED_BY(write_mu_) = false;  // WriterLoop returned.
  bool writing_ ABSL_GUARDED_BY(write_mu_) = false;      // A popped response in Write.
  absl::Time full_since_ ABSL_GUARDED_BY(write_mu_) = absl::InfiniteFuture();
};

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_GENERATE_SESSION_H_
