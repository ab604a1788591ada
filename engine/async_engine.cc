#include "engine/async_engine.h"

#include <functional>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "engine/max_model_len.h"
#include "engine/spec_decode/spec_decode_config.h"
#include "engine/structured_output/constraint_matcher.h"
#include "worker/kv_cache.h"

namespace rill::engine {
namespace {

SchedulerConfig SchedulerConfigOf(const EngineArgs& args) {
  SchedulerConfig sched;
  sched.max_num_seqs = args.max_num_seqs;
  sched.max_num_batched_tokens = args.max_num_batched_tokens;
  sched.max_model_len = args.max_model_len;
  sched.policy = args.scheduling_policy;
  sched.max_loras = args.max_loras;
  sched.free_out_of_window_blocks = args.free_out_of_window_kv_blocks;
  sched.slo.itl = absl::Milliseconds(args.target_itl_ms);
  sched.slo.ttft = absl::Milliseconds(args.target_ttft_ms);
  return sched;
}

spec_decode::SpecDecodeConfig SpecDecodeConfigOf(const EngineArgs& args) {
  spec_decode::SpecDecodeConfig spec;
  spec.ngram_k = args.speculative_ngram_k;
  spec.ngram_min_n = args.speculative_ngram_min_n;
  spec.ngram_max_n = args.speculative_ngram_max_n;
  spec.price_ngram_drafts = args.speculative_ngram_pricing;
  spec.disable_batch_size = args.speculative_disable_batch_size;
  spec.draft_model = args.speculative_model;
  spec.num_draft_tokens = args.speculative_num_draft_tokens;
  return spec;
}

}  // namespace

absl::StatusOr<EngineArgs> AsyncEngine::ResolveArgs(const EngineArgs& args,
                                                    const ModelExecutor& executor) {
  absl::StatusOr<int64_t> max_model_len =
      ResolveMaxModelLen(args.max_model_len, executor.model_config().max_position_embeddings);
  if (!max_model_len.ok()) return max_model_len.status();
  EngineArgs resolved = args;
  resolved.max_model_len = *max_model_len;
  if (absl::Status s = ValidateSchedulerConfig(SchedulerConfigOf(resolved)); !s.ok()) return s;
  if (absl::Status s = spec_decode::ValidateSpecDecodeConfig(SpecDecodeConfigOf(resolved));
      !s.ok()) {
    return s;
  }
  if (args.max_loras < 1 || args.max_lora_rank < 1 || args.max_cpu_loras < args.max_loras) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need max_loras >= 1 (got ", args.max_loras, "), max_lora_rank >= 1 (got ",
        args.max_lora_rank, ") and max_cpu_loras >= max_loras (got ", args.max_cpu_loras, ")"));
  }
  return resolved;
}

absl::StatusOr<std::unique_ptr<AsyncEngine>> AsyncEngine::Create(
    const EngineArgs& args, std::unique_ptr<ModelExecutor> executor) {
  return CreateWith<AsyncEngine>(
      args, std::move(executor),
      [](const EngineArgs& resolved, std::unique_ptr<ModelExecutor> executor) {
        return std::unique_ptr<AsyncEngine>(
            new AsyncEngine(resolved, std::move(executor), /*text=*/nullptr));
      });
}

AsyncEngine::AsyncEngine(const EngineArgs& args, std::unique_ptr<ModelExecutor> executor,
                         SampleTextFactory text)
    : args_(args),
      executor_(std::move(executor)),
      lora_(args, executor_.get()),
      outputs_(std::move(text)) {
  core_ = std::make_unique<EngineCore>(executor_.get(), SchedulerConfigOf(args),
                                       args.enable_prefix_caching);
  core_->SetSpeculation(SpecDecodeConfigOf(args));
  config_.model.path = args.model;
  config_.model.config = executor_->model_config();
  config_.model.max_model_len = core_->scheduler().config().max_model_len;
  config_.cache.block_size = executor_->block_size();
  config_.cache.num_blocks = executor_->num_blocks();
  config_.cache.kv_cache_bytes = executor_->kv_cache_bytes();
  if (!executor_->kv_cache_dtype().empty()) {
    config_.cache.kv_cache_dtype = executor_->kv_cache_dtype();
  } else if (absl::StatusOr<kernels::cpu::KvDtype> d =
                 worker::ParseKvCacheDtype(args.kv_cache_dtype);
             d.ok()) {
    config_.cache.kv_cache_dtype = worker::KvCacheDtypeName(*d);
  }
  config_.cache.enable_prefix_caching = args.enable_prefix_caching;
  config_.parallel.tensor_parallel_size = executor_->tensor_parallel_size();
  config_.parallel.threads = executor_->num_threads();
  config_.parallel.backend = executor_->backend();
  config_.parallel.kernel_plan = executor_->kernel_plan();
  config_.parallel.communicator = executor_->communicator();
  config_.scheduler = core_->scheduler().config();
  config_.decoding.eos_token_ids = core_->eos_token_ids();
  config_.lora.enabled = executor_->supports_lora();
  config_.lora.max_loras = args.max_loras;
  config_.lora.max_lora_rank = args.max_lora_rank;
  config_.lora.max_cpu_loras = args.max_cpu_loras;
  config_.lora.root = args.lora_root;
  config_.options = EngineOptionValues(args);
  metrics_ = std::make_unique<EngineMetrics>(args, config_);
  outputs_.SetMetrics(metrics_.get());
  // The gauges (the step token budget among them) hold real values before
  // the first step; the loop thread has not started, so this is its only user.
  PublishStats();
  core_->SetTransitionCallback(
      [this](const std::vector<std::pair<std::string, RequestState>>& t) { ApplyTransitions(t); });
  // A worker process that dies is pushed here by the executor (from its
  // own thread), so the loop never polls for it.
  death_is_pushed_ = executor_->SetDeathCallback([this](const absl::Status& cause) {
    SetDead(absl::UnavailableError(absl::StrCat("engine is dead: ", cause.message())));
  });
}

absl::Status AsyncEngine::Init() {
  Start();
  return lora_.LoadStartupAdapters();
}

AsyncEngine::~AsyncEngine() {
  Stop();
  grammars_.reset();  // Its last callbacks post to commands_, never run.
  executor_->SetDeathCallback(nullptr);
}

void AsyncEngine::Start() {
  if (running_.exchange(true)) return;
  {
    absl::MutexLock lock(&mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void AsyncEngine::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!thread_.joinable()) return;
    stop_ = true;
  }
  thread_.join();
  running_ = false;
  // Commands that raced with the stop: run them and abort what they added,
  // so no stream waits forever.
  std::deque<Command> late;
  {
    absl::MutexLock lock(&mu_);
    late.swap(commands_);
  }
  for (Command& c : late) c();
  Teardown();
}

void AsyncEngine::Teardown() {
  FailEncodes(absl::UnavailableError("the engine stopped before the Encode request ran"));
  for (const std::string& id : compiling_) {
    statuses_.Set(id, StatusOf(RequestState::kFinishedAborted));
    outputs_.Finish(id, RequestState::kFinishedAborted, absl::OkStatus());
  }
  compiling_.clear();
  for (const std::string& id : core_->scheduler().UnfinishedIds()) (void)core_->AbortRequest(id);
  Deliver(core_->TakePendingOutputs());
  PublishStats();
}

void AsyncEngine::Post(Command command) {
  absl::MutexLock lock(&mu_);
  commands_.push_back(std::move(command));
}

absl::Status AsyncEngine::RunOnLoop(std::function<absl::Status()> command) {
  if (!running_) return absl::FailedPreconditionError("the engine loop is not running");
  auto done = std::make_shared<absl::Notification>();
  auto status = std::make_shared<absl::Status>();
  Post([command = std::move(command), done, status] {
    *status = command();
    done->Notify();
  });
  done->WaitForNotification();
  return *status;
}

void AsyncEngine::Deliver(const std::vector<EngineCoreOutput>& outputs) {
  for (const EngineCoreOutput& o : outputs) {
    ProcessResult r = outputs_.Process(o);
    if (!r.known) continue;
    // A stop string matched downstream of the core: end the sample there.
    if (r.stop_matched) core_->FinishStopped(o.request_id);
    if (r.request_finished || !IsFinished(r.state)) statuses_.Set(r.request_id, StatusOf(r.state));
    r.Deliver();
  }
}

void AsyncEngine::ApplyTransitions(
    const std::vector<std::pair<std::string, RequestState>>& transitions) {
  for (const auto& [id, state] : transitions) {
    const std::string request_id = outputs_.RequestOf(id);
    if (!request_id.empty()) statuses_.Set(request_id, StatusOf(state));
  }
}

absl::StatusOr<std::shared_ptr<RequestOutputStream>> AsyncEngine::Generate(
    std::vector<int32_t> prompt_token_ids, const SamplingParams& params,
    const std::string& request_id, int priority, absl::Time arrival_time,
    const std::string& lora_name) {
  return Submit(std::move(prompt_token_ids), "", params, request_id, priority, arrival_time,
                lora_name, nullptr);
}

absl::Status AsyncEngine::GenerateWithCallback(std::vector<int32_t> prompt_token_ids,
                                               const SamplingParams& params,
                                               const std::string& request_id,
                                               OutputCallback callback, int priority,
                                               absl::Time arrival_time,
                                               const std::string& lora_name) {
  if (!callback) return absl::InvalidArgumentError("callback is empty");
  return Submit(std::move(prompt_token_ids), "", params, request_id, priority, arrival_time,
                lora_name, std::move(callback))
      .status();
}

absl::StatusOr<std::shared_ptr<RequestOutputStream>> AsyncEngine::Submit(
    std::vector<int32_t> ids, std::string prompt_text, const SamplingParams& params,
    const std::string& request_id, int priority, absl::Time arrival,
    const std::string& lora_name, OutputCallback callback) {
  if (absl::Status s = CheckGenerateAllowed(request_id); !s.ok()) return s;
  auto request = std::make_unique<Request>(request_id, std::move(ids), params);
  request->priority = priority;
  request->times.arrival = arrival == absl::InfinitePast() ? absl::Now() : arrival;
  request->lora_name = lora_name;
  if (!lora_name.empty()) {
    // May reload an evicted adapter: file I/O here, on the caller's thread.
    absl::StatusOr<LoraHandle> lora = lora_.Acquire(lora_name);
    if (!lora.ok()) return lora.status();
    request->lora = lora->adapter;
    request->lora_key = lora->cache_key;
  }
  if (absl::Status s = core_->Validate(*request); !s.ok()) return s;
  if (absl::Status s = CheckConstraint(params.constraint); !s.ok()) return s;
  if (absl::Status s = statuses_.Add(request_id); !s.ok()) return s;
  auto stream = std::make_shared<RequestOutputStream>(request_id, std::move(callback));
  // One core request per sample; samples after the first fork the first
  // one's prompt blocks.
  auto samples = std::make_shared<std::vector<std::unique_ptr<Request>>>();
  const int n = params.n;
  for (int i = 0; i < n; ++i) {
    auto sample = std::make_unique<Request>(SampleRequestId(request_id, i, n),
                                            request->prompt_token_ids, params.ForSample(i));
    sample->priority = request->priority;
    sample->times.arrival = request->times.arrival;
    sample->lora_name = request->lora_name;
    sample->lora = request->lora;
    sample->lora_key = request->lora_key;
    if (i > 0) sample->fork_parent_id = SampleRequestId(request_id, 0, n);
    samples->push_back(std::move(sample));
  }
  const bool constrained = params.constraint.active();
  Post([this, samples, stream, request_id, params, constrained,
        text = std::move(prompt_text)]() mutable {
    outputs_.AddRequest(request_id, std::move(text), (*samples)[0]->prompt_token_ids, params,
                        (*samples)[0]->times.arrival, stream);
    if (constrained) {
      compiling_.insert(request_id);  // Admitted by OnGrammarCompiled.
    } else {
      AdmitSamples(request_id, *samples);
    }
  });
  if (constrained) {
    // Posted after the registration above, so the result finds the request.
    grammars_->Compile(params.constraint, [this, samples, request_id](
                                              absl::StatusOr<structured_output::CompiledConstraint> g) {
      Post([this, samples, request_id, g = std::move(g)] {
        OnGrammarCompiled(request_id, *samples, g);
      });
    });
  }
  return stream;
}

void AsyncEngine::AdmitSamples(const std::string& request_id,
                               std::vector<std::unique_ptr<Request>>& samples) {
  std::vector<std::string> added;
  for (std::unique_ptr<Request>& sample : samples) {
    const std::string id = sample->request_id;
    if (absl::Status s = core_->AddRequest(std::move(sample)); !s.ok()) {
      for (const std::string& a : added) core_->FinishStopped(a);
      statuses_.Set(request_id, RequestStatus::kFailed);
      outputs_.Finish(request_id, RequestState::kFinishedError, s);
      return;
    }
    added.push_back(id);
  }
}

void AsyncEngine::OnGrammarCompiled(
    const std::string& request_id, std::vector<std::unique_ptr<Request>>& samples,
    const absl::StatusOr<structured_output::CompiledConstraint>& grammar) {
  if (compiling_.erase(request_id) == 0) return;  // Aborted (or torn down) meanwhile.
  if (!grammar.ok()) {
    statuses_.Set(request_id, RequestStatus::kFailed);
    outputs_.Finish(request_id, RequestState::kFinishedError, grammar.status());
    return;
  }
  for (std::unique_ptr<Request>& sample : samples) {
    sample->matcher = std::make_shared<structured_output::ConstraintMatcher>(*grammar);
  }
  AdmitSamples(request_id, samples);
}

absl::Status AsyncEngine::EnableStructuredOutputs(const structured_output::GrammarVocabulary& vocab) {
  if (grammars_ != nullptr) return absl::FailedPreconditionError("structured outputs are enabled already");
  structured_output::GrammarCompilerOptions options;
  options.num_threads = args_.structured_output_compile_threads;
  options.timeout = args_.structured_output_compile_timeout;
  options.limits.max_bytes = args_.structured_output_max_bytes;
  options.limits.max_json_depth = args_.structured_output_max_json_depth;
  absl::StatusOr<std::unique_ptr<structured_output::GrammarCompilerPool>> pool =
      structured_output::GrammarCompilerPool::Create(vocab, options);
  if (!pool.ok()) return pool.status();
  grammars_ = std::move(*pool);
  return absl::OkStatus();
}

absl::Status AsyncEngine::CheckConstraint(const structured_output::Constraint& constraint) const {
  if (!constraint.active()) return absl::OkStatus();
  if (grammars_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(structured_output::ConstraintKindName(constraint.kind),
                     ": structured outputs are not available (this engine has no tokenizer "
                     "vocabulary)"));
  }
  structured_output::ConstraintLimits limits;
  limits.max_bytes = args_.structured_output_max_bytes;
  limits.max_json_depth = args_.structured_output_max_json_depth;
  return structured_output::ValidateConstraint(constraint, limits);
}

absl::Status AsyncEngine::CheckGenerateAllowed(const std::string& request_id) const {
  if (absl::Status dead = DeadError(); !dead.ok()) return dead;
  if (!running_) return absl::UnavailableError("the engine is not running");
  if (request_id.empty()) return absl::InvalidArgumentError("request_id is empty");
  if (!executor_->can_generate()) {
    return absl::UnimplementedError(
        "this model is an encoder (embeddings only): it cannot generate; use Encode");
  }
  return absl::OkStatus();
}

absl::Status AsyncEngine::Abort(const std::string& request_id) {
  if (absl::Status s = statuses_.CheckUnfinished(request_id); !s.ok()) return s;
  // NotFound here means it finished meanwhile: nothing to do.
  Post([this, request_id] {
    if (compiling_.erase(request_id) > 0) {
      statuses_.Set(request_id, StatusOf(RequestState::kFinishedAborted));
      outputs_.Finish(request_id, RequestState::kFinishedAborted, absl::OkStatus());
      return;
    }
    for (const std::string& id : outputs_.SampleIds(request_id)) (void)core_->AbortRequest(id);
  });
  return absl::OkStatus();
}

absl::Status AsyncEngine::CheckHealth() const {
  if (absl::Status dead = DeadError(); !dead.ok()) return dead;
  if (!running_) return absl::UnavailableError("the engine loop is not running");
  return absl::OkStatus();
}

void AsyncEngine::SetDead(const absl::Status& cause) const {
  absl::MutexLock lock(&mu_);
  if (!dead_error_.ok()) return;
  dead_error_ = cause;
  // Releasing mu_ re-evaluates the loop's wait condition, which reads dead_.
  dead_ = true;
}

absl::Status AsyncEngine::DeadError() const {
  if (!death_is_pushed_ && !dead_.load()) {
    // Executors without a death callback are asked here (callers' threads,
    // never the loop); the others have told SetDead already.
    if (absl::Status s = executor_->CheckHealth(); !s.ok()) {
      SetDead(absl::UnavailableError(absl::StrCat("engine is dead: ", s.message())));
    }
  }
  absl::MutexLock lock(&mu_);
  return dead_error_;
}

absl::StatusOr<std::vector<std::string>> AsyncEngine::CollectiveRpc(const std::string& method) {
  std::vector<std::string> results;
  absl::Status s = RunOnLoop([&] {
    absl::StatusOr<std::vector<std::string>> r = executor_->CollectiveRpc(method);
    if (!r.ok()) return r.status();
    results = std::move(*r);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return results;
}

absl::Status AsyncEngine::ResetPrefixCache() {
  return RunOnLoop([this] {
    core_->block_manager().ResetPrefixCache();
    return absl::OkStatus();
  });
}

absl::Status AsyncEngine::SetKvEventListener(KvEventListener listener) {
  return RunOnLoop([this, listener = std::move(listener)]() mutable {
    core_->block_manager().SetEventListener(std::move(listener));
    return absl::OkStatus();
  });
}

absl::Status AsyncEngine::Sleep(int level) {
  if (level < 0 || level > 2) return absl::InvalidArgumentError("sleep level must be 0, 1 or 2");
  return RunOnLoop([this, level] {
    sleeping_ = true;
    return core_->Sleep(level);
  });
}

absl::Status AsyncEngine::WakeUp() {
  return RunOnLoop([this] {
    absl::Status s = core_->WakeUp();
    if (s.ok()) sleeping_ = false;
    return s;
  });
}

// Request counts are counted as each final output is processed, before it
// is delivered, so a reader of the final output sees its count.
EngineStats AsyncEngine::GetStats() const { return metrics_->Read(); }

void AsyncEngine::PublishStats() {
  EngineStateNumbers n;
  const Scheduler& scheduler = core_->scheduler();
  n.num_running = scheduler.num_running();
  n.num_waiting = scheduler.num_waiting();
  n.kv_usage = core_->block_manager().Usage();
  n.sleeping = sleeping_.load();
  n.computed_prompt_tokens = core_->stats().prompt_tokens;
  n.steps = core_->stats().steps;
  n.preemptions = core_->stats().preemptions;
  n.prefix_queried_tokens = core_->block_manager().stats().queried_tokens;
  n.prefix_hit_tokens = core_->block_manager().stats().hit_tokens;
  n.spec_decode = core_->spec_stats();
  n.device_sampled_rows = core_->stats().device_sampled_rows;
  n.host_sampled_rows = core_->stats().host_sampled_rows;
  n.step_token_budget = scheduler.slo_budget().TokenBudget();
  if (config_.lora.enabled) {
    n.running_loras = scheduler.RunningLoraNames();
    n.waiting_loras = scheduler.WaitingLoraNames();
  }
  metrics_->OnState(n);
}

void AsyncEngine::RunStep() {
  if (dead_.load()) {
    dead_noticed_ = true;
    // Nothing unfinished may wait for a step that will never come.
    const absl::Status cause = DeadError();
    if (core_->HasUnfinished()) Deliver(core_->FailAll(cause));
    FailEncodes(cause);
    Deliver(core_->TakePendingOutputs());
    return;
  }
  if (sleeping_) {
    Deliver(core_->TakePendingOutputs());
    return;
  }
  RunEncodes();
  if (!core_->HasUnfinished()) {
    Deliver(core_->TakePendingOutputs());
    return;
  }
  const absl::Time step_start = absl::Now();
  const int64_t tokens_before = core_->stats().prompt_tokens + core_->stats().generation_tokens;
  const int seqs = core_->scheduler().num_running();
  absl::StatusOr<std::vector<EngineCoreOutput>> outs = core_->Step();
  profiler_.RecordStep(step_start, absl::Now() - step_start, seqs,
                       core_->stats().prompt_tokens + core_->stats().generation_tokens -
                           tokens_before);
  if (outs.ok()) {
    const StepReport& step = core_->last_step();
    if (step.num_seqs > 0) {
      metrics_->OnStep({absl::Now() - step_start, step.execute, step.sample, step.num_seqs,
                        step.num_tokens, step.collective});
    }
    Deliver(*outs);
    return;
  }
  LOG(ERROR) << "engine step failed; failing all requests: " << outs.status();
  // The running requests end with the dead engine's status, as new ones are
  // refused: UNAVAILABLE (retry once the engine is back) with the step's
  // cause, whatever code the executor used.
  SetDead(absl::UnavailableError(absl::StrCat("engine is dead: ", outs.status().message())));
  Deliver(core_->FailAll(DeadError()));
}

void AsyncEngine::Loop() {
  absl::Time last_log = absl::Now();
  while (true) {
    // Unfinished requests on a dead engine are work too: they must be failed.
    const bool has_work = (core_->HasUnfinished() && (!sleeping_ || dead_.load())) ||
                          (!pending_encodes_.empty() && !sleeping_);
    std::deque<Command> commands;
    bool stop = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !commands_.empty() || (dead_.load() && !dead_noticed_.load());
      };
      if (!has_work) {
        const absl::Duration wait = args_.log_stats_interval > absl::ZeroDuration()
                                        ? args_.log_stats_interval
                                        : absl::InfiniteDuration();
        mu_.AwaitWithTimeout(absl::Condition(&ready), wait);
      }
      commands.swap(commands_);
      stop = stop_;
    }
    for (Command& c : commands) c();
    if (stop) break;
    RunStep();
    PublishStats();
    if (args_.log_stats_interval > absl::ZeroDuration() &&
        absl::Now() - last_log >= args_.log_stats_interval) {
      DoLogStats();
      last_log = absl::Now();
    }
  }
  Teardown();
}

}  // namespace rill::engine
