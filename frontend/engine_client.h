// The frontend's side of the engine protocol: one multiplexed Generate stream
// per frontend process (reconnected with backoff when the engine goes away),
// the engine's unary RPCs, and the tokenizer built from its TokenizerSpec.
#ifndef RILL_FRONTEND_ENGINE_CLIENT_H_
#define RILL_FRONTEND_ENGINE_CLIENT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "frontend/session_options.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/wordpiece_tokenizer.h"
#include "rill/internal/engine.grpc.pb.h"

namespace rill::frontend {

// Thread-safe. Outputs for a request are delivered, in order, on the single
// stream reader thread; a sink must not block for long.
class EngineClient {
 public:
  using Sink = std::function<void(const rill::internal::EngineOutput&)>;
  // Milliseconds suggested to clients in grpc-retry-pushback-ms.
  static constexpr int kRetryPushbackMs = 1000;

  // `transport`: keepalive and message size limits of the engine channel.
  // `credentials` null: plaintext; `tls_server_name` non-empty: the name the
  // engine's certificate must carry instead of the host in `address`.
  // `engine_secret` non-empty: sent on every call of channel() (the engine
  // answers UNAUTHENTICATED without it; base/call_auth.h).
  EngineClient(std::string address, std::string frontend_id,
               GrpcTransportOptions transport = DefaultEngineTransport(),
               std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr,
               const std::string& tls_server_name = "", const std::string& engine_secret = "");
  // Like GrpcTransportOptions{} but with room for the tokenizer spec.
  static GrpcTransportOptions DefaultEngineTransport() {
    GrpcTransportOptions t;
    t.max_receive_bytes = 256 << 20;
    return t;
  }
  ~EngineClient();

  // Fetches the tokenizer (retrying until `timeout`), then starts the stream
  // and health threads. Fails when no tokenizer could be loaded, at once
  // (Unauthenticated) when the engine refuses this client's credentials.
  absl::Status Start(absl::Duration timeout);
  void Shutdown();

  // The BPE tokenizer of a generative model; only valid when can_generate().
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  // False for an encoder model (spec "wordpiece"): embeddings only.
  bool can_generate() const { return tokenizer_ != nullptr; }
  // The WordPiece tokenizer of an encoder model (BERT), else null.
  const tokenizer::WordPieceTokenizer* wordpiece() const { return wordpiece_.get(); }
  const rill::internal::TokenizerSpec& spec() const { return spec_; }
  int64_t max_model_len() const { return spec_.max_model_len(); }
  const std::string& frontend_id() const { return frontend_id_; }

  // A server-assigned client request id: "<frontend_id>-<32 hex digits>",
  // 128 bits from the kernel's CSPRNG, so no client can guess another's.
  std::string NewRequestId();
  // The id request `client_id` runs under at the engine
  // (base::EngineRequestId): new for every start.
  std::string NewEngineId(const std::string& client_id);

  // Registers `sink` for start.request_id() (an engine id) and sends the
  // start. UNAVAILABLE when the stream is down, ALREADY_EXISTS when the id is
  // in flight here. The sink is dropped after it got a finished output.
  absl::Status StartRequest(const rill::internal::EngineStart& start, Sink sink);
  // Drops the sink (no more outputs are delivered) and aborts on the engine.
  void AbortRequest(const std::string& request_id);

  // Stream up and engine healthy.
  bool serving() const { return serving_.load(); }
  std::string unavailable_reason() const;
  // Called (from internal threads) whenever serving() changes.
  void SetServingCallback(std::function<void(bool)> cb);

  // Names this frontend's engine session on a unary call whose request ids
  // must reach this frontend's requests (Abort, GetRequestStatus, Encode).
  void AddSessionMetadata(grpc::ClientContext* ctx) const;
  rill::internal::Engine::Stub* stub() { return stub_.get(); }
  std::shared_ptr<grpc::Channel> channel() { return channel_; }

 private:
  void StreamLoop();
  void HealthLoop();
  void UpdateServing();
  void FailAll(const std::string& reason);
  bool Write(const rill::internal::EngineRequest& req);

  const std::string address_;
  const std::string frontend_id_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rill::internal::Engine::Stub> stub_;
  rill::internal::TokenizerSpec spec_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<tokenizer::WordPieceTokenizer> wordpiece_;
  std::atomic<uint64_t> next_engine_id_{0};

  std::atomic<bool> shutdown_{false};
  std::atomic<bool> stream_up_{false};
  std::atomic<bool> engine_healthy_{false};
  std::atomic<bool> serving_{false};
  std::thread stream_thread_;
  std::thread health_thread_;

  mutable absl::Mutex mu_;
  absl::CondVar shutdown_cv_;
  absl::flat_hash_map<std::string, Sink> sinks_ ABSL_GUARDED_BY(mu_);
  std::string reason_ ABSL_GUARDED_BY(mu_) = "engine stream not connected yet";
  // The engine session of the current Generate stream (base/engine_session.h):
  // "<random>.<n>", new for every stream so a reconnect never meets the old
  // stream's requests (whose clean-up may still run on the engine).
  std::string session_ ABSL_GUARDED_BY(mu_);
  uint64_t session_salt_ = 0;
  uint64_t stream_generation_ = 0;  // StreamLoop's thread only.
  std::function<void(bool)> serving_cb_ ABSL_GUARDED_BY(mu_);
  grpc::ClientContext* stream_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;

  absl::Mutex write_mu_;
  grpc::ClientReaderWriter<rill::internal::EngineRequest,
                           rill::internal::EngineOutput>* stream_
      ABSL_GUARDED_BY(write_mu_) = nullptr;
};

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_ENGINE_CLIENT_H_
