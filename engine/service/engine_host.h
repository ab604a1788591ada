// Owns the AsyncEngine (token ids only) of a rill-engine process and its lifecycle:
// loading (in the background, so the gRPC server and its health probes answer
// meanwhile), ready, failed to load. Services ask it whether they may serve.
#ifndef RILL_ENGINE_SERVICE_ENGINE_HOST_H_
#define RILL_ENGINE_SERVICE_ENGINE_HOST_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/async_engine.h"
#include "engine/service/tokenizer_zip.h"
#include "tokenizer/tokenizer_spec.h"

namespace rill::base::tracing {
class SpanExporter;  // base/tracing/span_exporter.h
}

namespace rill::engine::service {

struct HostOptions {
  engine::EngineArgs args;
  std::string model_name = "default";  // As given on the command line.
  // What GetModelInfo reports as tokenizer_path (--vllm_tokenizer_path);
  // empty: the model's path.
  std::string vllm_tokenizer_path;
  int max_waiting_requests = 0;        // 0 = no limit.
  absl::Duration load_delay;           // Tests: hold the loading state this long.
  // Where request spans go (--otlp_traces_endpoint); null: tracing off.
  base::tracing::SpanExporter* tracer = nullptr;
};

class EngineHost {
 public:
  using Factory = std::function<absl::StatusOr<std::unique_ptr<engine::AsyncEngine>>()>;

  // `factory` empty: engine::CreateAsyncEngine(options.args).
  explicit EngineHost(HostOptions options, Factory factory = nullptr);
  ~EngineHost();

  // Starts loading on a background thread; returns at once.
  void StartLoading();
  // Blocks until loading finished (either way); its status.
  absl::Status WaitLoaded();

  // Nullopt while loading (or before StartLoading); then how loading ended.
  std::optional<absl::Status> LoadResult() const;

  // The engine once loaded, else null. Valid until the host is destroyed.
  engine::AsyncEngine* engine() const { return engine_ptr_.load(); }
  const HostOptions& options() const { return options_; }
  // Spec of the tokenizer (tokens present) once loaded; null if none.
  const tokenizer::TokenizerSpec* tokenizer_spec() const;
  // An encoder model's tokenizer.json text (WordPiece) once loaded; else empty.
  const std::string& wordpiece_json() const { return wordpiece_json_; }
  // A GGUF encoder's HF tokenizer files (tokenizer.json and
  // tokenizer_config.json written from its vocabulary), what GetTokenizer
  // ships for it; empty for a directory (its own files) and decoders.
  const std::vector<ZipEntry>& gguf_encoder_tokenizer_files() const { return gguf_encoder_files_; }

  // OK when new requests may be served; UNAVAILABLE with the reason while
  // loading, sleeping, after a failed load or when the engine is dead.
  absl::Status Serving() const;

  // Like Serving, but only loading/dead block (sleeping engines queue work).
  absl::Status Usable() const;

  // Aborts all requests and stops the loop (unfinished ones end "abort").
  void Shutdown();

 private:
  void Load();

  const HostOptions options_;
  Factory factory_;
  std::thread loader_;
  std::unique_ptr<engine::AsyncEngine> engine_;
  std::atomic<engine::AsyncEngine*> engine_ptr_{nullptr};
  std::unique_ptr<tokenizer::TokenizerSpec> spec_;
  std::string wordpiece_json_;  // Written before engine_ptr_ is published.
  std::vector<ZipEntry> gguf_encoder_files_;  // Likewise.
  mutable absl::Mutex mu_;
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status load_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_ENGINE_HOST_H_
