// The token-only asynchronous engine (vLLM's engine core client, in
// process): a background loop thread owns the scheduler, KV blocks and
// executor; every public method is thread-safe and talks to the loop through
// a command queue, so callers never run model code. Prompts and outputs are
// token ids (+ logprobs, metrics): rill-engine serves this directly, and
// AsyncLLMEngine (async_llm_engine.h) wraps text around it.
//
// The pieces with one job each: EngineCore (one step, loop thread),
// OutputProcessor (outputs -> streams, loop thread), RequestStatusTable,
// LoraAdmin and EngineStatsReporter (thread-safe, any thread).
#ifndef RILL_ENGINE_ASYNC_ENGINE_H_
#define RILL_ENGINE_ASYNC_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/block_manager.h"
#include "engine/engine_args.h"
#include "engine/engine_core.h"
#include "engine/engine_metrics.h"
#include "engine/engine_stats.h"
#include "engine/lora_admin.h"
#include "engine/model_executor.h"
#include "engine/output_processor.h"
#include "engine/output_stream.h"
#include "engine/pooling_params.h"
#include "engine/request_status_table.h"
#include "engine/sample_text.h"
#include "engine/step_profiler.h"
#include "engine/structured_output/grammar_compiler.h"
#include "worker/pooling.h"

namespace rill::engine {

class AsyncEngine {
 public:
  // Validates `args` against the executor's model, starts the loop and loads
  // the start-up LoRA adapters.
  static absl::StatusOr<std::unique_ptr<AsyncEngine>> Create(
      const EngineArgs& args, std::unique_ptr<ModelExecutor> executor);

  virtual ~AsyncEngine();  // Stops the loop; unfinished requests end as "abort".

  // Validation errors come back at once (bad params, too-long prompts,
  // duplicate ids, an unknown lora_name is NotFound); the outputs follow on
  // the stream.
  absl::StatusOr<std::shared_ptr<RequestOutputStream>> Generate(
      std::vector<int32_t> prompt_token_ids, const SamplingParams& params,
      const std::string& request_id, int priority = 0,
      absl::Time arrival_time = absl::InfinitePast(), const std::string& lora_name = "");
  // As Generate, delivering outputs to `callback` on the loop thread.
  absl::Status GenerateWithCallback(std::vector<int32_t> prompt_token_ids,
                                    const SamplingParams& params, const std::string& request_id,
                                    OutputCallback callback, int priority = 0,
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
  absl::Status EncodeAsync(std::vector<int32_t> prompt_token_ids, const PoolingParams& params,
                           const std::string& request_id, EmbeddingCallback callback);
  // Blocking form of EncodeAsync.
  absl::StatusOr<EmbeddingOutput> Encode(std::vector<int32_t> prompt_token_ids,
                                         const PoolingParams& params,
                                         const std::string& request_id);
  bool SupportsEncode() const { return executor_->can_pool(); }
  bool SupportsGenerate() const { return executor_->can_generate(); }
  bool IsEncoderModel() const { return executor_->is_encoder(); }

  // LoRA adapters (see lora_admin.h); Generate names one by lora_name.
  absl::StatusOr<LoraInfo> AddLora(const LoraRequest& request) { return lora_.Add(request); }
  absl::Status RemoveLora(const std::string& name) { return lora_.Remove(name); }
  std::vector<LoraInfo> ListLoras() const { return lora_.List(); }

  // Enables structured outputs (SamplingParams::constraint) over the model's
  // vocabulary: starts the compile threads. Call once, before serving; until
  // then constrained requests are refused (FailedPrecondition).
  absl::Status EnableStructuredOutputs(const structured_output::GrammarVocabulary& vocab);
  bool SupportsStructuredOutputs() const { return grammars_ != nullptr; }

  // Ends the request within one step ("abort"); NotFound if not unfinished.
  absl::Status Abort(const std::string& request_id);

  absl::StatusOr<RequestStatus> GetRequestStatus(const std::string& request_id) const {
    return statuses_.Get(request_id);
  }
  int GetNumUnfinishedRequests() const { return statuses_.num_unfinished(); }
  const worker::loader::ModelConfig& GetModelConfig() const { return executor_->model_config(); }
  const EngineConfig& GetEngineConfig() const { return config_; }

  // Health, as vLLM's check_health: OK while the loop runs and the engine is
  // not dead; else UNAVAILABLE with the cause.
  absl::Status CheckHealth() const;
  // The loop thread runs (Create starts it; Stop ends it).
  bool IsRunning() const { return running_.load(); }
  // OK unless the engine is dead (a step failed or the executor died), else
  // the cause. Asks the executor, so a worker process that died while the
  // engine was idle is noticed by the next call (and the loop is woken to
  // fail what is unfinished).
  absl::Status DeadError() const;

  // Allow-listed worker methods ("ping", "get_worker_info"): one JSON result
  // per tensor-parallel rank, run on the loop between steps.
  absl::StatusOr<std::vector<std::string>> CollectiveRpc(const std::string& method);

  absl::Status ResetPrefixCache();
  // Prefix-cache changes from now on go to `listener` (block_manager.h), on
  // the loop thread; null stops them.
  absl::Status SetKvEventListener(KvEventListener listener);
  // Stops scheduling; level >= 1 also preempts running requests and drops
  // the KV cache. New requests queue until WakeUp.
  absl::Status Sleep(int level = 1);
  absl::Status WakeUp();
  bool IsSleeping() const { return sleeping_.load(); }

  // Logs one line (running/waiting, KV usage, prefix hit rate, tokens/s
  // since the last call), passes the numbers to the extra loggers and
  // returns them.
  EngineStats DoLogStats() { return stats_.Log(GetStats()); }
  // Read from the metrics registry (Metrics()), so it agrees with /metrics.
  EngineStats GetStats() const;
  // GetStats plus the token rates since the previous call (Admin.GetStats).
  EngineStats GetStatsWithRates() { return stats_.WithRates(GetStats()); }
  // The Prometheus families (vLLM's names); any thread may read them.
  const EngineMetrics& Metrics() const { return *metrics_; }
  // Extra stat sinks (metrics exporters, tests) beside the glog line.
  // AlreadyExists / NotFound on a duplicate / unknown name.
  absl::Status AddLogger(const std::string& name, StatLogger logger) {
    return stats_.AddLogger(name, std::move(logger));
  }
  absl::Status RemoveLogger(const std::string& name) { return stats_.RemoveLogger(name); }

  // Records every engine step until StopProfile, which writes a Chrome trace
  // into `dir` and returns its path.
  absl::Status StartProfile(const std::string& dir) { return profiler_.Start(dir); }
  absl::StatusOr<std::string> StopProfile() { return profiler_.Stop(); }

  // Starts / stops the loop thread (Create starts it). Stop aborts what is
  // unfinished; Start after Stop resumes serving.
  void Start();
  void Stop();

 protected:
  // `text` (may be empty) gives outputs their text; see sample_text.h.
  AsyncEngine(const EngineArgs& args, std::unique_ptr<ModelExecutor> executor,
              SampleTextFactory text);
  // Create's checks of `args` against the executor's model; the args with
  // max_model_len resolved.
  static absl::StatusOr<EngineArgs> ResolveArgs(const EngineArgs& args,
                                                const ModelExecutor& executor);
  // Starts the loop and loads the start-up adapters (Create's second half).
  absl::Status Init();
  // Create's steps, written once for this class and AsyncLLMEngine: checks
  // the executor and `args` (ResolveArgs), builds the engine with
  // `construct(resolved_args, executor)` and starts it (Init).
  template <typename Engine, typename Construct>
  static absl::StatusOr<std::unique_ptr<Engine>> CreateWith(
      const EngineArgs& args, std::unique_ptr<ModelExecutor> executor, Construct construct) {
    if (executor == nullptr) return absl::InvalidArgumentError("no model executor");
    absl::StatusOr<EngineArgs> resolved = ResolveArgs(args, *executor);
    if (!resolved.ok()) return resolved.status();
    std::unique_ptr<Engine> engine = construct(*resolved, std::move(executor));
    if (absl::Status s = engine->Init(); !s.ok()) return s;
    return engine;
  }

  // What refuses any Generate before its prompt is looked at: a dead or
  // stopped engine, an empty id, a model that cannot generate.
  absl::Status CheckGenerateAllowed(const std::string& request_id) const;
  // A constraint is refused at once (before any compile) when structured
  // outputs are off (FailedPrecondition) or it breaks a limit (InvalidArgument).
  absl::Status CheckConstraint(const structured_output::Constraint& constraint) const;
  // Admits one request; `prompt_text` is echoed in its outputs, which go to
  // `callback` on the loop thread, or (null callback) to the returned
  // stream's queue.
  absl::StatusOr<std::shared_ptr<RequestOutputStream>> Submit(
      std::vector<int32_t> ids, std::string prompt_text, const SamplingParams& params,
      const std::string& request_id, int priority, absl::Time arrival,
      const std::string& lora_name, OutputCallback callback);

 private:
  using Command = std::function<void()>;

  void Post(Command command);
  // Runs `command` on the loop and waits for its status.
  absl::Status RunOnLoop(std::function<absl::Status()> command);
  void Loop();
  // Loop thread: one iteration's work after the commands ran.
  void RunStep();
  // Loop thread: aborts what is unfinished and fails pending encodes (the
  // loop ends or the engine stops).
  void Teardown();
  void Deliver(const std::vector<EngineCoreOutput>& outputs);
  // Marks the engine dead (first cause wins) and wakes the loop.
  void SetDead(const absl::Status& cause) const;
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
  // Loop thread: adds a request's samples to the core (all or none).
  void AdmitSamples(const std::string& request_id, std::vector<std::unique_ptr<Request>>& samples);
  // Loop thread: a constrained request's grammar is compiled (or failed);
  // admits its samples, each with its own matcher, unless it was aborted.
  void OnGrammarCompiled(const std::string& request_id,
                         std::vector<std::unique_ptr<Request>>& samples,
                         const absl::StatusOr<structured_output::CompiledConstraint>& grammar);

  const EngineArgs args_;
  std::unique_ptr<ModelExecutor> executor_;
  EngineConfig config_;
  LoraAdmin lora_;
  RequestStatusTable statuses_;
  EngineStatsReporter stats_;
  std::unique_ptr<EngineMetrics> metrics_;  // Set in the constructor, never null.
  StepProfiler profiler_;
  // Loop-thread state.
  std::unique_ptr<EngineCore> core_;
  OutputProcessor outputs_;
  std::vector<PendingEncode> pending_encodes_;
  // Requests whose constraint is compiling: known to outputs_ and statuses_,
  // not yet to the core.
  absl::flat_hash_set<std::string> compiling_;
  int64_t next_encode_seq_ = 0;

  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<bool> sleeping_{false};
  // Set once with dead_error_; the loop reads only this flag.
  mutable std::atomic<bool> dead_{false};
  // The executor reports its death (SetDeathCallback): DeadError never polls it.
  bool death_is_pushed_ = false;
  // The loop has failed what the death left unfinished (it waits again).
  std::atomic<bool> dead_noticed_{false};

  mutable absl::Mutex mu_;
  std::deque<Command> commands_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  mutable absl::Status dead_error_ ABSL_GUARDED_BY(mu_);
  // Null until EnableStructuredOutputs. Its threads post results to the
  // loop, so the destructor resets it before the queue goes.
  std::unique_ptr<structured_output::GrammarCompilerPool> grammars_;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_ASYNC_ENGINE_H_
