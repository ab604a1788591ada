// Continuous batching with a per-step token budget.
//
// Each step: running requests that decode (1 token each) first, then running
// requests still in (chunked) prefill, then waiting requests in policy order,
// each taking what is left of max_num_batched_tokens. A prompt longer than
// the budget is split across steps. When the KV cache runs out, the
// lowest-priority running request (FCFS: the latest arrival) is preempted by
// recompute: its blocks are freed and it goes back to waiting with its
// outputs so far to be recomputed together with its prompt. Under the
// priority policy a waiting request that finds no free sequence slot or
// blocks also preempts a running request of strictly lower priority.
// With SLO targets (SchedulerConfig::slo, see slo_budget.h) a prefill chunk
// also gets no more tokens than keep the step's predicted time within the
// ITL target; decodes are never held back for it.
// Not thread-safe: the engine loop owns it.
#ifndef RILL_ENGINE_SCHEDULER_H_
#define RILL_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/block_manager.h"
#include "engine/request.h"
#include "engine/slo_budget.h"
#include "engine/step_time_model.h"

namespace rill::engine {

enum class SchedulingPolicy { kFcfs, kPriority };

struct SchedulerConfig {
  int max_num_seqs = 64;
  int max_num_batched_tokens = 2048;
  int64_t max_model_len = 2048;  // Prompt + outputs per request.
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  // Distinct LoRA adapters among running requests (so in any one step); a
  // waiting request of another adapter waits. 0: no limit.
  int max_loras = 0;
  // The model's sliding window when it covers every layer (EngineCore sets
  // it from the model unless free_out_of_window_blocks is off), else 0. A
  // sequence's blocks whose keys all fell out of it are released each step,
  // so its live blocks stay bounded by the window plus one step's tokens.
  // Gemma 2/3 alternate windowed and global layers: the global layers read
  // every block, so nothing is freed there (the window stays 0).
  int64_t sliding_window = 0;
  bool free_out_of_window_blocks = true;
  // Latency targets that shape each step's prefill chunks; off by default.
  SloTargets slo;
};

absl::Status ValidateSchedulerConfig(const SchedulerConfig& config);

struct ScheduledChunk {
  Request* request = nullptr;
  int64_t start_pos = 0;   // == request->num_computed_tokens at schedule time.
  int64_t num_tokens = 0;  // New tokens this step.
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  int64_t num_batched_tokens = 0;
  std::vector<Request*> preempted;  // Preempted during this Schedule call.
  bool empty() const { return chunks.empty(); }
  // The chunks' work, as the step-time model sees it (drafts not included).
  StepShape Shape() const;
};

class Scheduler {
 public:
  // `blocks` must outlive the scheduler.
  Scheduler(const SchedulerConfig& config, BlockManager* blocks);

  const SchedulerConfig& config() const { return config_; }

  // Admission checks: AlreadyExists for a duplicate id; InvalidArgument when
  // the prompt is empty, prompt + max_tokens exceeds max_model_len, or the
  // request could never fit in the whole KV cache.
  absl::Status AddRequest(std::unique_ptr<Request> request);
  // The length / cache-size part of the admission checks. Reads only
  // immutable configuration, so any thread may call it.
  absl::Status CheckFits(const Request& request) const;

  SchedulerOutput Schedule(absl::Time now);
  // What a step took (schedule to sampled tokens) for the work it ran (the
  // plan's Shape plus the drafts it verified, see DraftBudget): feeds the
  // SLO budget's step-time model. A no-op without SLO targets, unless
  // speculative decoding prices its drafts with that model
  // (set_measure_step_times).
  void RecordStepTime(const StepShape& step, absl::Duration step_time);
  void set_measure_step_times(bool on) { measure_step_times_ = on; }
  // The SLO budget (targets, step-time model, chosen token budget).
  const SloBudget& slo_budget() const { return slo_; }

  // Marks the request finished with `state`, frees its blocks and hands it
  // back (the scheduler forgets it). nullptr for an unknown id.
  std::unique_ptr<Request> FinishRequest(const std::string& request_id, RequestState state);

  // Preempts every running request (used before dropping the KV cache).
  void PreemptAll();

  Request* Find(const std::string& request_id) const;
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_unfinished() const { return static_cast<int>(requests_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  // (request id, new state) for every admission (RUNNING) and preemption
  // since the last call, in order.
  std::vector<std::pair<std::string, RequestState>> TakeTransitions();
  std::vector<std::string> UnfinishedIds() const;
  // The LoRA adapters of the running / waiting requests: sorted distinct
  // names joined by ',' ("" for none). O(requests): call when LoRA is on.
  std::string RunningLoraNames() const;
  std::string WaitingLoraNames() const;

 private:
  // Strict weak order: the request that should run first compares less.
  struct Order {
    SchedulingPolicy policy;
    bool operator()(const Request* a, const Request* b) const;
  };

  void Preempt(Request* request);
  // Priority policy: preempts the lowest-priority running request if
  // `request` strictly outranks it, taking back its chunk of this step.
  bool PreemptFor(const Request* request, absl::flat_hash_map<Request*, size_t>* chunk_of,
                  SchedulerOutput* out, int64_t* budget);
  // The parent's full prompt blocks for a forked sample; false while the
  // parent has not computed its prompt yet.
  bool ForkBlocks(const Request& request, std::vector<int32_t>* blocks) const;
  void RemoveFromRunning(Request* request);
  // Table entries wholly out of the window for a step whose first new token
  // sits at `start`: no query at a position >= start reads their keys.
  int64_t DeadBlocks(int64_t start) const;
  // Whether admitting `request` keeps the running adapters within max_loras.
  bool LoraFits(const Request& request) const;
  // How many of `remaining` tokens from `start` a prefill chunk of `r` may
  // take in the step planned so far (all of them without SLO targets).
  int64_t PrefillLimit(const Request& r, int64_t start, int64_t remaining,
                       const StepShape& planned, bool first_prefill, absl::Time now) const;

  SchedulerConfig config_;
  BlockManager* blocks_;
  Order order_;
  absl::flat_hash_map<std::string, std::unique_ptr<Request>> requests_;
  std::set<Request*, Order> waiting_;
  std::vector<Request*> running_;
  int64_t next_seq_no_ = 0;
  int64_t num_preemptions_ = 0;
  std::vector<std::pair<std::string, RequestState>> transitions_;
  SloBudget slo_;
  bool measure_step_times_ = false;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_SCHEDULER_H_
