#include "engine/async_llm_engine.h"

#include <functional>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "worker/kv_cache.h"
#include "worker/lora/lora_adapter.h"

namespace rill::engine {
namespace {

constexpr size_t kFinishedStatusesKept = 10000;

RequestStatus StatusOf(RequestState s) {
  switch (s) {
    case RequestState::kWaiting:
    case RequestState::kPreempted: return RequestStatus::kWaiting;
    case RequestState::kRunning: return RequestStatus::kRunning;
    case RequestState::kFinishedStopped:
    case RequestState::kFinishedLength: return RequestStatus::kCompleted;
    case RequestState::kFinishedAborted: return RequestStatus::kCancelled;
    case RequestState::kFinishedError: return RequestStatus::kFailed;
  }
  return RequestStatus::kFailed;
}

bool IsFinal(RequestStatus s) {
  return s == RequestStatus::kCompleted || s == RequestStatus::kCancelled ||
         s == RequestStatus::kFailed;
}

}  // namespace

const char* RequestStatusName(RequestStatus s) {
  switch (s) {
    case RequestStatus::kWaiting: return "WAITING";
    case RequestStatus::kRunning: return "RUNNING";
    case RequestStatus::kCompleted: return "COMPLETED";
    case RequestStatus::kCancelled: return "CANCELLED";
    case RequestStatus::kFailed: return "FAILED";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> AsyncLLMEngine::Create(
    const EngineArgs& args, std::unique_ptr<ModelExecutor> executor,
    std::unique_ptr<tokenizer::BpeTokenizer> tokenizer) {
  if (executor == nullptr) return absl::InvalidArgumentError("no model executor");
  const int64_t context = executor->model_config().max_position_embeddings;
  if (args.max_model_len > 0 && context > 0 && args.max_model_len > context) {
    return absl::InvalidArgumentError(absl::StrCat("max_model_len ", args.max_model_len,
                                                   " exceeds the model's context length of ",
                                                   context));
  }
  SchedulerConfig sched;
  sched.max_num_seqs = args.max_num_seqs;
  sched.max_num_batched_tokens = args.max_num_batched_tokens;
  sched.max_model_len = args.max_model_len > 0 ? args.max_model_len : (context > 0 ? context : 2048);
  sched.policy = args.scheduling_policy;
  sched.max_loras = args.max_loras;
  if (absl::Status s = ValidateSchedulerConfig(sched); !s.ok()) return s;
  if (args.max_loras < 1 || args.max_lora_rank < 1 || args.max_cpu_loras < args.max_loras) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need max_loras >= 1 (got ", args.max_loras, "), max_lora_rank >= 1 (got ",
        args.max_lora_rank, ") and max_cpu_loras >= max_loras (got ", args.max_cpu_loras, ")"));
  }
  EngineArgs fixed = args;
  fixed.max_model_len = sched.max_model_len;
  auto engine = std::unique_ptr<AsyncLLMEngine>(
      new AsyncLLMEngine(fixed, std::move(executor), std::move(tokenizer)));
  engine->Start();
  for (const auto& [name, path] : args.loras) {
    absl::StatusOr<LoraInfo> added = engine->AddLoraTrusted(LoraRequest{name, 0, path});
    if (!added.ok()) {
      return absl::Status(added.status().code(), absl::StrCat("--lora ", name, "=", path, ": ",
                                                              added.status().message()));
    }
  }
  if (!args.lora_registry_file.empty()) engine->RestoreLoras();
  return engine;
}

AsyncLLMEngine::AsyncLLMEngine(const EngineArgs& args, std::unique_ptr<ModelExecutor> executor,
                               std::unique_ptr<tokenizer::BpeTokenizer> tokenizer)
    : args_(args),
      executor_(std::move(executor)),
      tokenizer_(std::move(tokenizer)),
      outputs_(tokenizer_.get()) {
  SchedulerConfig sched;
  sched.max_num_seqs = args.max_num_seqs;
  sched.max_num_batched_tokens = args.max_num_batched_tokens;
  sched.max_model_len = args.max_model_len;
  sched.policy = args.scheduling_policy;
  sched.max_loras = args.max_loras;
  core_ = std::make_unique<EngineCore>(executor_.get(), sched, args.enable_prefix_caching);
  config_.model.path = args.model;
  config_.model.config = executor_->model_config();
  config_.model.max_model_len = core_->scheduler().config().max_model_len;
  config_.cache.block_size = executor_->block_size();
  config_.cache.num_blocks = executor_->num_blocks();
  config_.cache.kv_cache_bytes = executor_->kv_cache_bytes();
  if (!executor_->kv_cache_dtype().empty()) {
    config_.cache.kv_cache_dtype = executor_->kv_cache_dtype();
  } else if (absl::StatusOr<cpu::KvDtype> d = worker::ParseKvCacheDtype(args.kv_cache_dtype);
             d.ok()) {
    config_.cache.kv_cache_dtype = worker::KvCacheDtypeName(*d);
  }
  config_.cache.enable_prefix_caching = args.enable_prefix_caching;
  config_.parallel.tensor_parallel_size = executor_->tensor_parallel_size();
  config_.parallel.threads = executor_->num_threads();
  config_.parallel.backend = executor_->backend();
  config_.parallel.kernel_plan = executor_->kernel_plan();
  config_.scheduler = core_->scheduler().config();
  config_.decoding.eos_token_ids = core_->eos_token_ids();
  config_.lora.enabled = executor_->supports_lora();
  config_.lora.max_loras = args.max_loras;
  config_.lora.max_lora_rank = args.max_lora_rank;
  config_.lora.max_cpu_loras = args.max_cpu_loras;
  config_.lora.root = args.lora_root;
  lora_ = std::make_unique<LoraRegistry>(
      [executor = executor_.get(), rank = args.max_lora_rank](const std::string& path,
                                                               const std::string& root) {
        worker::LoraLoadOptions options;
        options.max_rank = rank;
        options.root = root;
        return executor->LoadLora(path, options);
      },
      args.max_cpu_loras);
  core_->SetTransitionCallback(
      [this](const std::vector<std::pair<std::string, RequestState>>& t) { ApplyTransitions(t); });
}

AsyncLLMEngine::~AsyncLLMEngine() { Stop(); }

void AsyncLLMEngine::Start() {
  if (running_.exchange(true)) return;
  {
    absl::MutexLock lock(&mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void AsyncLLMEngine::Stop() {
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
  FailEncodes(absl::UnavailableError("the engine stopped before the Encode request ran"));
  for (const std::string& id : core_->scheduler().UnfinishedIds()) (void)core_->AbortRequest(id);
  Deliver(core_->TakePendingOutputs());
}

void AsyncLLMEngine::Post(Command command) {
  absl::MutexLock lock(&mu_);
  commands_.push_back(std::move(command));
}

absl::Status AsyncLLMEngine::RunOnLoop(std::function<absl::Status()> command) {
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

void AsyncLLMEngine::SetStatus(const std::string& id, RequestStatus status) {
  absl::MutexLock lock(&mu_);
  auto it = status_.find(id);
  if (it == status_.end() || IsFinal(it->second)) return;
  it->second = status;
  if (!IsFinal(status)) return;
  --num_unfinished_;
  ++(status == RequestStatus::kCompleted   ? requests_finished_
     : status == RequestStatus::kCancelled ? requests_aborted_
                                           : requests_failed_);
  finished_ids_.push_back(id);
  while (finished_ids_.size() > kFinishedStatusesKept) {
    auto old = status_.find(finished_ids_.front());
    if (old != status_.end() && IsFinal(old->second)) status_.erase(old);
    finished_ids_.pop_front();
  }
}

void AsyncLLMEngine::Deliver(const std::vector<EngineCoreOutput>& outputs) {
  for (const EngineCoreOutput& o : outputs) {
    ProcessResult r = outputs_.Process(o);
    if (!r.known) continue;
    // A stop string matched downstream of the core: end the sample there.
    if (r.stop_matched) core_->FinishStopped(o.request_id);
    if (r.request_finished) {
      SetStatus(r.request_id, StatusOf(r.state));
    } else if (!IsFinished(r.state)) {
      SetStatus(r.request_id, StatusOf(r.state));
    }
    r.Deliver();
  }
}

void AsyncLLMEngine::ApplyTransitions(
    const std::vector<std::pair<std::string, RequestState>>& transitions) {
  for (const auto& [id, state] : transitions) {
    const std::string request_id = outputs_.RequestOf(id);
    if (!request_id.empty()) SetStatus(request_id, StatusOf(state));
  }
}

absl::StatusOr<std::shared_ptr<RequestOutputStream>> AsyncLLMEngine::Generate(
    const Prompt& prompt, const SamplingParams& params, const std::string& request_id,
    int priority, absl::Time arrival_time, const std::string& lora_name) {
  auto stream = std::make_shared<RequestOutputStream>(request_id);
  if (absl::Status s = AddRequest(prompt, params, request_id, priority, arrival_time, lora_name,
                                  stream);
      !s.ok()) {
    return s;
  }
  return stream;
}

absl::Status AsyncLLMEngine::GenerateWithCallback(const Prompt& prompt,
                                                  const SamplingParams& params,
                                                  const std::string& request_id,
                                                  OutputCallback callback, int priority,
                                                  absl::Time arrival_time,
                                                  const std::string& lora_name) {
  if (!callback) return absl::InvalidArgumentError("callback is empty");
  auto stream = std::make_shared<RequestOutputStream>(request_id, std::move(callback));
  return AddRequest(prompt, params, request_id, priority, arrival_time, lora_name,
                    std::move(stream));
}

absl::Status AsyncLLMEngine::AddRequest(const Prompt& prompt, const SamplingParams& params,
                                        const std::string& request_id, int priority,
                                        absl::Time arrival, const std::string& lora_name,
                                        std::shared_ptr<RequestOutputStream> stream) {
  if (absl::Status dead = DeadError(); !dead.ok()) return dead;
  if (!running_) return absl::UnavailableError("the engine is not running");
  if (request_id.empty()) return absl::InvalidArgumentError("request_id is empty");
  if (!executor_->can_generate()) {
    return absl::UnimplementedError(
        "this model is an encoder (embeddings only): it cannot generate; use Encode");
  }
  std::vector<int32_t> ids = prompt.token_ids;
  if (!prompt.is_tokens) {
    if (tokenizer_ == nullptr) {
      return absl::InvalidArgumentError("text prompts need a tokenizer; send token ids");
    }
    ids = tokenizer_->Encode(prompt.text, /*add_special_tokens=*/true);
  }
  auto request = std::make_unique<Request>(request_id, ids, params);
  request->priority = priority;
  request->times.arrival = arrival == absl::InfinitePast() ? absl::Now() : arrival;
  request->lora_name = lora_name;
  if (!lora_name.empty()) {
    // May reload an evicted adapter: file I/O here, on the caller's thread.
    absl::StatusOr<LoraHandle> lora = lora_->Acquire(lora_name);
    if (!lora.ok()) return lora.status();
    request->lora = lora->adapter;
    request->lora_key = lora->cache_key;
  }
  if (absl::Status s = core_->Validate(*request); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    auto it = status_.find(request_id);
    if (it != status_.end() && !IsFinal(it->second)) {
      return absl::AlreadyExistsError(
          absl::StrCat("request id '", request_id, "' is already in use"));
    }
    status_[request_id] = RequestStatus::kWaiting;
    ++num_unfinished_;
  }
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
  Post([this, samples, stream, request_id, params,
        text = prompt.is_tokens ? "" : prompt.text] {
    outputs_.AddRequest(request_id, text, (*samples)[0]->prompt_token_ids, params,
                        (*samples)[0]->times.arrival, stream);
    std::vector<std::string> added;
    for (std::unique_ptr<Request>& sample : *samples) {
      const std::string id = sample->request_id;
      if (absl::Status s = core_->AddRequest(std::move(sample)); !s.ok()) {
        for (const std::string& a : added) core_->FinishStopped(a);
        SetStatus(request_id, RequestStatus::kFailed);
        outputs_.Finish(request_id, RequestState::kFinishedError, s);
        return;
      }
      added.push_back(id);
    }
  });
  return absl::OkStatus();
}

absl::Status AsyncLLMEngine::Abort(const std::string& request_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = status_.find(request_id);
    if (it == status_.end() || IsFinal(it->second)) {
      return absl::NotFoundError(absl::StrCat("no unfinished request '", request_id, "'"));
    }
  }
  // NotFound here means it finished meanwhile: nothing to do.
  Post([this, request_id] {
    for (const std::string& id : outputs_.SampleIds(request_id)) (void)core_->AbortRequest(id);
  });
  return absl::OkStatus();
}

absl::StatusOr<RequestStatus> AsyncLLMEngine::GetRequestStatus(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = status_.find(id);
  if (it == status_.end()) return absl::NotFoundError(absl::StrCat("unknown request '", id, "'"));
  return it->second;
}

int AsyncLLMEngine::GetNumUnfinishedRequests() const {
  absl::MutexLock lock(&mu_);
  return num_unfinished_;
}

absl::Status AsyncLLMEngine::CheckHealth() const {
  if (absl::Status dead = DeadError(); !dead.ok()) return dead;
  if (!running_) return absl::UnavailableError("the engine loop is not running");
  return absl::OkStatus();
}

bool AsyncLLMEngine::Errored() const { return !DeadError().ok(); }

absl::Status AsyncLLMEngine::DeadError() const {
  absl::MutexLock lock(&mu_);
  if (dead_error_.ok()) {
    if (absl::Status s = executor_->CheckHealth(); !s.ok()) {
      dead_error_ = absl::UnavailableError(absl::StrCat("engine is dead: ", s.message()));
    }
  }
  return dead_error_;
}

absl::StatusOr<std::vector<std::string>> AsyncLLMEngine::CollectiveRpc(
    const std::string& method) {
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

absl::Status AsyncLLMEngine::ResetPrefixCache() {
  return RunOnLoop([this] {
    core_->block_manager().ResetPrefixCache();
    return absl::OkStatus();
  });
}

absl::Status AsyncLLMEngine::Sleep(int level) {
  if (level < 0 || level > 2) return absl::InvalidArgumentError("sleep level must be 0, 1 or 2");
  return RunOnLoop([this, level] {
    sleeping_ = true;
    return core_->Sleep(level);
  });
}

absl::Status AsyncLLMEngine::WakeUp() {
  return RunOnLoop([this] {
    absl::Status s = core_->WakeUp();
    if (s.ok()) sleeping_ = false;
    return s;
  });
}

EngineStats AsyncLLMEngine::GetStats() const {
  absl::MutexLock lock(&mu_);
  EngineStats s = stats_;
  // Live, so a request's count is in by the time its final output is seen.
  s.requests_finished = requests_finished_;
  s.requests_aborted = requests_aborted_;
  s.requests_failed = requests_failed_;
  return s;
}

void AsyncLLMEngine::PublishStats() {
  EngineStats s;
  s.num_running = core_->scheduler().num_running();
  s.num_waiting = core_->scheduler().num_waiting();
  s.kv_usage = core_->block_manager().Usage();
  s.prefix_cache_hit_rate = core_->block_manager().stats().HitRate();
  s.prompt_tokens = core_->stats().prompt_tokens;
  s.generation_tokens = core_->stats().generation_tokens;
  s.steps = core_->stats().steps;
  s.preemptions = core_->stats().preemptions;
  absl::MutexLock lock(&mu_);
  stats_ = s;
}

absl::Status AsyncLLMEngine::AddLogger(const std::string& name, StatLogger logger) {
  if (!logger) return absl::InvalidArgumentError("logger must not be empty");
  absl::MutexLock lock(&mu_);
  for (const auto& entry : loggers_) {
    if (entry.first == name) {
      return absl::AlreadyExistsError(absl::StrCat("a logger named '", name, "' exists"));
    }
  }
  loggers_.emplace_back(name, std::move(logger));
  return absl::OkStatus();
}

absl::Status AsyncLLMEngine::RemoveLogger(const std::string& name) {
  absl::MutexLock lock(&mu_);
  for (auto it = loggers_.begin(); it != loggers_.end(); ++it) {
    if (it->first == name) {
      loggers_.erase(it);
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(absl::StrCat("no logger named '", name, "'"));
}

EngineStats AsyncLLMEngine::DoLogStats() {
  EngineStats s;
  std::vector<std::pair<std::string, StatLogger>> loggers;
  {
    absl::MutexLock lock(&mu_);
    s = LogStatsLocked();
    loggers = loggers_;
  }
  // Outside the lock: a logger may call back into the engine.
  for (const auto& entry : loggers) entry.second(s);
  return s;
}

EngineStats AsyncLLMEngine::LogStatsLocked() {
  const EngineStats s = stats_;
  const absl::Time now = absl::Now();
  const double dt = std::max(1e-9, absl::ToDoubleSeconds(now - last_logged_time_));
  LOG(INFO) << absl::StrFormat(
      "engine: %d running, %d waiting, KV cache %.1f%% used, prefix cache hit rate %.1f%%, "
      "prompt %.1f tokens/s, generation %.1f tokens/s, %d preemptions",
      s.num_running, s.num_waiting, 100.0 * s.kv_usage, 100.0 * s.prefix_cache_hit_rate,
      (s.prompt_tokens - last_logged_.prompt_tokens) / dt,
      (s.generation_tokens - last_logged_.generation_tokens) / dt, s.preemptions);
  last_logged_ = s;
  last_logged_time_ = now;
  return s;
}

void AsyncLLMEngine::Loop() {
  absl::Time last_log = absl::Now();
  while (true) {
    // Unfinished requests on a dead engine are work too: they must be failed.
    const bool has_work = core_->HasUnfinished() && (!sleeping_ || Errored());
    std::deque<Command> commands;
    bool stop = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !commands_.empty();
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
    if (!sleeping_ && !Errored()) RunEncodes();
    if (!sleeping_ && core_->HasUnfinished() && !Errored()) {
      const absl::Time step_start = absl::Now();
      const int64_t tokens_before = core_->stats().prompt_tokens + core_->stats().generation_tokens;
      const int seqs = core_->scheduler().num_running();
      absl::StatusOr<std::vector<EngineCoreOutput>> outs = core_->Step();
      profiler_.RecordStep(step_start, absl::Now() - step_start, seqs,
                           core_->stats().prompt_tokens + core_->stats().generation_tokens -
                               tokens_before);
      if (outs.ok()) {
        Deliver(*outs);
      } else {
        LOG(ERROR) << "engine step failed; failing all requests: " << outs.status();
        // The running requests end with the dead engine's status, as new
        // ones are refused: UNAVAILABLE (retry once the engine is back)
        // with the step's cause, whatever code the executor used.
        absl::Status dead =
            absl::UnavailableError(absl::StrCat("engine is dead: ", outs.status().message()));
        {
          absl::MutexLock lock(&mu_);
          dead_error_ = dead;
        }
        Deliver(core_->FailAll(dead));
      }
    } else if (Errored() && core_->HasUnfinished()) {
      // The executor died between steps (a worker process exited): nothing
      // unfinished may wait for a step that will never come.
      Deliver(core_->FailAll(DeadError()));
    } else {
      Deliver(core_->TakePendingOutputs());
    }
    PublishStats();
    if (args_.log_stats_interval > absl::ZeroDuration() &&
        absl::Now() - last_log >= args_.log_stats_interval) {
      DoLogStats();
      last_log = absl::Now();
    }
  }
  FailEncodes(absl::UnavailableError("the engine stopped before the Encode request ran"));
  for (const std::string& id : core_->scheduler().UnfinishedIds()) (void)core_->AbortRequest(id);
  Deliver(core_->TakePendingOutputs());
  PublishStats();
}

}  // namespace rill::engine
