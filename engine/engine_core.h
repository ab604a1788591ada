// The synchronous heart of the engine: admission, one Step() = schedule ->
// execute -> sample -> stop checks, and aborts. Single-threaded; the
// AsyncLLMEngine loop thread drives it (tests drive it directly).
#ifndef RILL_ENGINE_ENGINE_CORE_H_
#define RILL_ENGINE_ENGINE_CORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/block_manager.h"
#include "engine/draft_budget.h"
#include "engine/helper_thread.h"
#include "engine/model_executor.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/spec_decode/acceptance_model.h"
#include "engine/spec_decode/draft_model_proposer.h"
#include "engine/spec_decode/spec_decode_config.h"

namespace rill::engine {

// What one request produced in one step (or its end).
struct EngineCoreOutput {
  std::string request_id;
  std::vector<int32_t> new_token_ids;
  std::vector<float> new_logprobs;
  std::vector<TopLogprobs> new_top_logprobs;  // Empty unless params.logprobs > 0.
  // With the first token of a request with params.prompt_logprobs: per
  // prompt position 1..P-1, the prompt token's logprob and top alternatives.
  std::vector<float> prompt_logprobs;
  std::vector<TopLogprobs> prompt_top_logprobs;
  RequestState state = RequestState::kRunning;
  bool finished() const { return IsFinished(state); }
  std::optional<int32_t> stop_reason;
  // For FINISHED_ERROR: the cause, with its code (a dead worker is
  // UNAVAILABLE, which clients may retry).
  absl::Status error;
  RequestTimes times;
  int64_t num_cached_tokens = 0;
  int num_preemptions = 0;
  std::string lora_name;  // Set on the final output only (request logs).
};

// What the last Step ran, for metrics.
struct StepReport {
  int num_seqs = 0;
  int64_t num_tokens = 0;     // Scheduled tokens (draft tokens included).
  absl::Duration execute;     // The executor's forward (and the draft model's, if any).
  absl::Duration draft;       // Of execute: the draft model's forwards.
  absl::Duration sample;      // Logits processing + sampling.
  absl::Duration collective;  // Of execute: tensor-parallel collectives (slowest rank).
};

struct EngineCoreStats {
  int64_t steps = 0;
  int64_t prompt_tokens = 0;      // Prefill tokens computed (recompute included).
  int64_t generation_tokens = 0;  // Tokens sampled.
  int64_t preemptions = 0;
  // Rows sampled with an executor that samples on its device: there, and
  // on the host for a reason of engine/device_sampling.h (zero otherwise).
  int64_t device_sampled_rows = 0;
  int64_t host_sampled_rows = 0;
};

class EngineCore {
 public:
  // `executor` must outlive the core. scheduler.max_model_len is clamped to
  // the model's context length. The executor's draft model, if any, must
  // share the model's vocabulary (the engine factory checks it).
  EngineCore(ModelExecutor* executor, SchedulerConfig scheduler, bool enable_prefix_caching);

  // Validates sampling params and token ids (InvalidArgument naming the
  // field), then the scheduler's admission checks.
  absl::Status AddRequest(std::unique_ptr<Request> request);
  // Speculative decoding from the next Step on (off by default). The config
  // must be valid (ValidateSpecDecodeConfig).
  // N-gram drafts are priced with the step-time model, so the scheduler
  // measures steps.
  void SetSpeculation(const spec_decode::SpecDecodeConfig& config) {
    spec_ = config;
    scheduler_.set_measure_step_times(config.enabled());
  }
  const spec_decode::SpecDecodeStats& spec_stats() const { return spec_stats_; }
  // Drafting with the executor's draft model (config.num_draft_tokens > 0);
  // null when the executor has none.
  const spec_decode::DraftModelProposer* draft_proposer() const { return draft_.get(); }

  // All admission checks except the duplicate id; thread-safe (reads only
  // immutable configuration).
  absl::Status Validate(const Request& request) const;

  // Finishes the request as aborted and frees its blocks; its final output
  // comes from the next Step (or TakePendingOutputs). NotFound if unknown.
  absl::Status AbortRequest(const std::string& request_id);

  // One engine step. A failing Execute is returned as is; the scheduled
  // requests are then in an unknown state and the caller should FailAll.
  absl::StatusOr<std::vector<EngineCoreOutput>> Step();

  // Finishes every unfinished request with FINISHED_ERROR and `status`.
  std::vector<EngineCoreOutput> FailAll(const absl::Status& status);

  // Finishes the request as stopped (a stop string matched downstream)
  // without producing an output. False if it is not unfinished.
  bool FinishStopped(const std::string& request_id);

  // Called in Step after scheduling, before the model runs, with (request
  // id, state) for every admission (RUNNING) and preemption.
  using TransitionCallback =
      std::function<void(const std::vector<std::pair<std::string, RequestState>>&)>;
  void SetTransitionCallback(TransitionCallback callback) { on_transitions_ = std::move(callback); }

  // Outputs of aborts since the last Step.
  std::vector<EngineCoreOutput> TakePendingOutputs();

  // Level >= 1 preempts all running requests and drops the prefix cache
  // before the executor may drop the KV cache.
  absl::Status Sleep(int level);
  absl::Status WakeUp();

  bool HasUnfinished() const { return scheduler_.num_unfinished() > 0; }
  const Scheduler& scheduler() const { return scheduler_; }
  BlockManager& block_manager() { return blocks_; }
  const EngineCoreStats& stats() const { return stats_; }
  const StepReport& last_step() const { return last_step_; }
  ModelExecutor* executor() { return executor_; }
  const std::vector<int32_t>& eos_token_ids() const { return eos_ids_; }

 private:
  // What sampling one logits row gives (SampleRow), before the serial part.
  struct SampledRow {
    int32_t token = -1;
    float logprob = 0.0f;
    TopLogprobs top;  // params.logprobs > 0 only
  };
  // Applies r's logits processing to the row in place and samples it. Uses
  // only r's own state (its sampler, params, outputs so far), so different
  // requests' rows may be sampled at the same time. `draft_row`: -1 for the
  // row after r's outputs, else the row's position in a draft being
  // verified (its grammar bitmask row; the matcher stands past the draft).
  SampledRow SampleRow(Request* r, float* logits, int draft_row = -1) const;
  // Appends the sampled token and applies stop checks; returns the output.
  // `check_grammar` false skips syncing the grammar matcher, for a verified
  // draft token it accepted already. Engine loop thread, serially.
  EngineCoreOutput Advance(Request* r, SampledRow tok, bool check_grammar = true);
  // Execute, with the grammar bitmasks of the rows to sample (for a chunk
  // that verifies a draft, one per position) filled on mask_filler_
  // meanwhile (structured outputs).
  absl::Status ExecuteFillingMasks(const SchedulerOutput& plan, const worker::ForwardBatch& batch,
                                   worker::ForwardOutput* fwd);
  // Internal unless the executor returned a token in the vocabulary for
  // every sequence of `batch` with device_sampling.
  absl::Status CheckDeviceSampled(const worker::ForwardBatch& batch,
                                  const worker::ForwardOutput& fwd) const;
  // Records prompt logprobs from an all_logits row of chunk `c`.
  void RecordPromptLogprobs(const ScheduledChunk& c, const std::vector<float>& row);

  // Speculative decoding (engine_core_spec.cc). Fills drafts_[i] for the
  // plan's decode chunks that speculate this step, with KV blocks allocated
  // for their draft positions, within `budget` (which records them). A
  // constrained request's draft ends before the first token its grammar
  // rejects.
  void ProposeDrafts(const SchedulerOutput& plan, DraftBudget* budget);
  // Cuts the n-gram proposals of plan chunks `chunks` (in drafts_) to the
  // lengths that maximise the step's expected tokens per second
  // (draft_length_choice.h): acceptance estimated by acceptance_, the step's
  // time by the scheduler's step-time model (measured per step size). Until
  // it has measured steps of the decodes alone, no drafts; until it has
  // measured a larger size too, the per-sequence draft_length rule.
  void ChooseNgramDraftLengths(const SchedulerOutput& plan, const std::vector<size_t>& chunks);
  // The draft model's tokens for wants[w] (plan chunk chunks[w]) into
  // drafts_, with target KV blocks for them; none this step if it fails.
  // Each returned draft takes its tokens from `budget` in plan order (cut
  // to what is left), so a draft that comes back short or finds no blocks
  // leaves its share to the drafts after it. The draft forwards' time goes
  // into last_step_.execute.
  void ProposeFromDraftModel(const SchedulerOutput& plan,
                             const std::vector<spec_decode::DraftModelProposer::Want>& wants,
                             const std::vector<size_t>& chunks, DraftBudget* budget);
  // Samples the rows of a chunk that verifies `draft` (row j predicts the
  // token after draft[j - 1]; a constrained row is masked with the grammar
  // bitmask after draft[0, j)) until a sample differs from the draft: the
  // accepted draft tokens, then the differing (or bonus) token. Same
  // threading as SampleRow.
  std::vector<SampledRow> VerifyDraft(Request* r, float* rows,
                                      const std::vector<int32_t>& draft) const;
  // The same for a draft sampled from the proposal rows `q` (one per draft
  // token): draft token x at row j is accepted with probability
  // min(1, p(x) / q(x)), p being the request's own sampling distribution
  // there; the first rejected one is replaced by a draw from
  // max(p - q, 0) normalised. Only for requests SampledDraftTemperature
  // accepts (p is softmax(processed logits / T)).
  std::vector<SampledRow> VerifySampledDraft(Request* r, float* rows,
                                             const std::vector<int32_t>& draft,
                                             const std::vector<float>& q) const;
  // The temperature at which r's draft-model proposals are sampled: r's own
  // when it samples from the whole distribution (no top-k / top-p / min-p,
  // no grammar), else 0 (greedy proposals, exact at any temperature).
  float SampledDraftTemperature(const Request& r) const;
  // Advances r by the verified tokens (one output), rolls the KV cache (and
  // the grammar matcher) back past the accepted ones and adapts r's draft
  // length. Loop thread.
  EngineCoreOutput AdvanceVerified(Request* r, const ScheduledChunk& c,
                                   const std::vector<int32_t>& draft,
                                   const spec_decode::DraftContext& context,
                                   std::vector<SampledRow> tokens);

  ModelExecutor* executor_;
  // Before blocks_, so it outlives the block manager's freed-sequence
  // listener that releases its sequences.
  std::unique_ptr<spec_decode::DraftModelProposer> draft_;
  BlockManager blocks_;
  Scheduler scheduler_;
  std::vector<int32_t> eos_ids_;
  int64_t vocab_size_;
  worker::ForwardOutput fwd_;  // The last step's logits, reused across steps.
  std::vector<size_t> sample_rows_;  // Step scratch: plan indices to sample.
  // Step scratch: their samples (one, or a verified draft's tokens).
  std::vector<std::vector<SampledRow>> sampled_;
  // Step scratch: per plan chunk, the draft it verifies (mostly empty).
  std::vector<std::vector<int32_t>> drafts_;
  // Per plan chunk: the proposal rows of a sampled draft (else empty).
  std::vector<std::vector<float>> draft_probs_;
  // Per plan chunk: what was known of its n-gram draft when it was proposed.
  std::vector<spec_decode::DraftContext> draft_contexts_;
  // How n-gram drafts are accepted, engine-wide (per sequence: on Request).
  spec_decode::AcceptanceModel acceptance_;
  // Tokens emitted and seconds taken by recent decode-only steps
  // (forgetting): the long-run rate draft lengths are priced against.
  double decode_tokens_ = 0.0;
  double decode_seconds_ = 0.0;
  spec_decode::SpecDecodeConfig spec_;
  spec_decode::SpecDecodeStats spec_stats_;
  EngineCoreStats stats_;
  StepReport last_step_;
  std::vector<EngineCoreOutput> pending_;
  TransitionCallback on_transitions_;
  // Fills grammar bitmasks during the forward; its thread starts with the
  // first constrained step and lives as long as the core.
  HelperThread mask_filler_;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_ENGINE_CORE_H_
