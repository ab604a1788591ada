// The in-process engine API (vLLM's AsyncLLMEngine shape). A background loop
// thread owns the scheduler, KV blocks and executor; every public method is
// thread-safe and talks to the loop through a command queue, so callers
// never run model code. Generate returns a stream immediately after
// validation (bad params, too-long prompts and duplicate ids fail there).
#ifndef RILL_ENGINE_ASYNC_LLM_ENGINE_H_
#define RILL_ENGINE_ASYNC_LLM_ENGINE_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine_args.h"
#include "engine/engine_core.h"
#include "engine/lora_registry.h"
#include "engine/model_executor.h"
#include "engine/output_processor.h"
#include "engine/output_stream.h"
#include "engine/pooling_params.h"
#include "engine/step_profiler.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/wordpiece_tokenizer.h"
#include "worker/pooling.h"

namespace rill::engine {

// A prompt as text (tokenized with the model's tokenizer, special tokens
// added) or as token ids.
struct Prompt {
  Prompt(std::string text) : text(std::move(text)) {}  // NOLINT: implicit by design.
  Prompt(const char* text) : text(text) {}            // NOLINT
  Prompt(std::vector<int32_t> ids) : token_ids(std::move(ids)), is_tokens(true) {}  // NOLINT
  std::string text;
  std::vector<int32_t> token_ids;
  bool is_tokens = false;
};

enum class RequestStatus { kWaiting, kRunning, kCompleted, kCancelled, kFailed };
const char* RequestStatusName(RequestStatus status);

struct EngineStats {
  int num_running = 0;
  int num_waiting = 0;
  double kv_usage = 0.0;
  double prefix_cache_hit_rate = 0.0;
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  int64_t steps = 0;
  int64_t preemptions = 0;
  // Requests that ended, by how: stop or length / aborted / failed (error).
  int64_t requests_finished = 0;
  int64_t requests_aborted = 0;
  int64_t requests_failed = 0;
};

// Receives the stats on every DoLogStats call (from the calling thread).
using StatLogger = std::function<void(const EngineStats&)>;

class AsyncLLMEngine {
 public:
  // Loads the model (LocalModelExecutor) and its tokenizer and starts the loop.
  static absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> Create(const EngineArgs& args);
  // With a given executor (tests, other executors); `tokenizer` may be null
  // (text prompts are then rejected and outputs carry no text).
  static absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> Create(
      const EngineArgs& args, std::unique_ptr<ModelExecutor> executor,
      std::unique_ptr<tokenizer::BpeTokenizer> tokenizer);

  ~AsyncLLMEngine();  // Stops the loop; unfinished requests end as "abort".

  absl::StatusOr<std::shared_ptr<RequestOutputStream>> Generate(
      const Prompt& prompt, const SamplingParams& params, const std::string& request_id,
      int priority = 0, absl::Time arrival_time = absl::InfinitePast(),
      const std::string& lora_name = "");
  // As Generate, delivering outputs to `callback` on the loop thread.
  absl::Status GenerateWithCallback(const Prompt& prompt, const SamplingParams& params,
                                    const std::string& request_id, OutputCallback callback,
                                    int priority = 0,
                                    absl::Time arrival_time = absl::InfinitePast(),
                                    const std::string& lora_name = "");

  // Embeds the prompt: its final hidden states pooled as `params` says.
  // Errors come back at once: InvalidArgument for an empty request id or
  // prompt, more tokens than max_model_len, an id outside the vocabulary or
  // dimensions outside [0, hidden_size]; Unimplemented when the model cannot
  // pool. Encode requests run in their own model call on the loop, between
  // generation steps, batched with the other Encode requests pending then;
  // they are not abortable and GetRequestStatus does not list them.
  // `callback` runs on the loop thread.
  absl::Status EncodeAsync(const Prompt& prompt, const PoolingParams& params,
                           const std::string& request_id, EmbeddingCallback callback);
  // Blocking form of EncodeAsync.
  absl::StatusOr<EmbeddingOutput> Encode(const Prompt& prompt, const PoolingParams& params,
                                         const std::string& request_id);
  bool SupportsEncode() const { return executor_->can_pool(); }
  bool SupportsGenerate() const { return executor_->can_generate(); }
  // The WordPiece tokenizer of an encoder model (BERT) for text prompts of
  // Encode; Create(EngineArgs) sets it. Call before the engine is shared.
  void SetEncoderTokenizer(std::unique_ptr<tokenizer::WordPieceTokenizer> t) {
    encoder_tokenizer_ = std::move(t);
  }
  const tokenizer::WordPieceTokenizer* GetEncoderTokenizer() const {
    return encoder_tokenizer_.get();
  }

  // LoRA adapters (see lora_registry.h); Generate names one by lora_name
  // (NotFound when it is not registered). AddLora loads the adapter on the
  // calling thread: PermissionDenied for a path outside EngineArgs::lora_root
  // (or with no root), Unimplemented when the executor cannot run adapters,
  // AlreadyExists for a used name or id, the loader's error for a bad
  // adapter (NotFound / InvalidArgument naming the file). RemoveLora lets
  // running requests of the adapter finish with it. Both keep
  // EngineArgs::lora_registry_file up to date.
  absl::StatusOr<LoraInfo> AddLora(const LoraRequest& request);
  absl::Status RemoveLora(const std::string& name);
  std::vector<LoraInfo> ListLoras() const { return lora_->List(); }

  // Ends the request within one step ("abort"); NotFound if not unfinished.
  absl::Status Abort(const std::string& request_id);

  absl::StatusOr<RequestStatus> GetRequestStatus(const std::string& request_id) const;
  int GetNumUnfinishedRequests() const;
  const loader::ModelConfig& GetModelConfig() const { return executor_->model_config(); }
  const EngineConfig& GetEngineConfig() const { return config_; }
  const tokenizer::BpeTokenizer* GetTokenizer() const { return tokenizer_.get(); }

  // OK while the loop runs and no step has failed; else the cause.
  absl::Status CheckHealth() const;
  bool IsRunning() const { return running_.load(); }
  bool IsStopped() const { return !running_.load(); }
  bool Errored() const;
  // OK unless Errored(). Also consults the executor, so a worker process
  // that died while the engine was idle is noticed by the next call.
  absl::Status DeadError() const;

  // Allow-listed worker methods ("ping", "get_worker_info"): one JSON result
  // per tensor-parallel rank, run on the loop between steps.
  absl::StatusOr<std::vector<std::string>> CollectiveRpc(const std::string& method);

  absl::Status ResetPrefixCache();
  // Stops scheduling; level >= 1 also preempts running requests and drops
  // the KV cache. New requests queue until WakeUp.
  absl::Status Sleep(int level = 1);
  absl::Status WakeUp();
  bool IsSleeping() const { return sleeping_.load(); }

  // Logs one line (running/waiting, KV usage, prefix hit rate, tokens/s
  // since the last call) and returns the numbers.
  EngineStats DoLogStats();

  // Extra stat sinks (metrics exporters, tests) beside the glog line.
  // AlreadyExists / NotFound on a duplicate / unknown name.
  absl::Status AddLogger(const std::string& name, StatLogger logger);
  absl::Status RemoveLogger(const std::string& name);

  // Records every engine step until StopProfile, which writes a Chrome trace
  // into `dir` and returns its path.
  absl::Status StartProfile(const std::string& dir) { return profiler_.Start(dir); }
  absl::StatusOr<std::string> StopProfile() { return profiler_.Stop(); }
  EngineStats GetStats() const;

  // Starts / stops the loop thread (Create starts it). Stop aborts what is
  // unfinished; Start after Stop resumes serving.
  void Start();
  void Stop();

 private:
  using Command = std::function<void()>;

  AsyncLLMEngine(const EngineArgs& args, std::unique_ptr<ModelExecutor> executor,
                 std::unique_ptr<tokenizer::BpeTokenizer> tokenizer);
  absl::Status AddRequest(const Prompt& prompt, const SamplingParams& params,
                          const std::string& request_id, int priority, absl::Time arrival,
                          const std::string& lora_name,
                          std::shared_ptr<RequestOutputStream> stream);
  // AddLora without the lora_root check (start-up adapters).
  absl::StatusOr<LoraInfo> AddLoraTrusted(const LoraRequest& request);
  // Registers and logs; `root` confines the adapter's files ("" for trusted).
  absl::StatusOr<LoraInfo> RegisterLora(const LoraRequest& request, const std::string& root);
  // Registers the adapters args_.lora_registry_file lists (Create), dropping
  // from it those that no longer load.
  void RestoreLoras();
  void PersistLorasLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(lora_admin_mu_);
  void Post(Command command);
  // Runs `command` on the loop and waits for its status.
  absl::Status RunOnLoop(std::function<absl::Status()> command);
  void Loop();
  void Deliver(const std::vector<EngineCoreOutput>& outputs);
  void SetStatus(const std::string& id, RequestStatus status);
  // Request status from the scheduler's admissions (RUNNING) and preemptions (WAITING).
  void ApplyTransitions(const std::vector<std::pair<std::string, RequestState>>& transitions);
  void PublishStats();
  struct PendingEncode {
    std::string request_id;
    std::vector<int32_t> ids;
    worker::PoolingSpec spec;
    EmbeddingCallback callback;
  };
  // Loop thread: runs every pending Encode (batches of at most max_num_seqs).
  void RunEncodes();
  // Fails every pending Encode with `status` (engine stopping).
  void FailEncodes(const absl::Status& status);
  EngineStats LogStatsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const EngineArgs args_;
  std::unique_ptr<ModelExecutor> executor_;
  std::unique_ptr<tokenizer::BpeTokenizer> tokenizer_;
  std::unique_ptr<tokenizer::WordPieceTokenizer> encoder_tokenizer_;
  EngineConfig config_;
  std::unique_ptr<LoraRegistry> lora_;
  // Serializes AddLora/RemoveLora with the rewrite of the registry file, so
  // the file lists exactly the runtime adapters that are registered.
  absl::Mutex lora_admin_mu_;
  std::vector<LoraRequest> runtime_loras_ ABSL_GUARDED_BY(lora_admin_mu_);  // In AddLora order.
  // Loop-thread state.
  std::unique_ptr<EngineCore> core_;
  OutputProcessor outputs_;
  absl::Time last_log_ = absl::Now();
  std::vector<PendingEncode> pending_encodes_;
  int64_t next_encode_seq_ = 0;

  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<bool> sleeping_{false};

  mutable absl::Mutex mu_;
  std::deque<Command> commands_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  mutable absl::Status dead_error_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, RequestStatus> status_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> finished_ids_ ABSL_GUARDED_BY(mu_);  // Oldest first, capped.
  int num_unfinished_ ABSL_GUARDED_BY(mu_) = 0;
  EngineStats stats_ ABSL_GUARDED_BY(mu_);
  // Counted as statuses turn final (SetStatus); GetStats adds them live.
  int64_t requests_finished_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t requests_aborted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t requests_failed_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<std::string, StatLogger>> loggers_ ABSL_GUARDED_BY(mu_);
  StepProfiler profiler_;
  EngineStats last_logged_ ABSL_GUARDED_BY(mu_);
  absl::Time last_logged_time_ ABSL_GUARDED_BY(mu_) = absl::Now();
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_ASYNC_LLM_ENGINE_H_
