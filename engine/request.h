// One generation request as the engine core tracks it. State machine:
//   WAITING -> RUNNING -> (PREEMPTED -> RUNNING)* -> FINISHED_*
// and any state -> FINISHED_ABORTED. Owned by the engine loop thread only.
#ifndef RILL_ENGINE_REQUEST_H_
#define RILL_ENGINE_REQUEST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "engine/sampling_params.h"
#include "engine/spec_decode/acceptance_model.h"
#include "worker/sampler.h"

namespace rill::worker {
struct LoraAdapter;  // worker/lora/lora_adapter.h
}

namespace rill::engine::structured_output {
class ConstraintMatcher;  // engine/structured_output/constraint_matcher.h
}

namespace rill::engine {

enum class RequestState {
  kWaiting,
  kRunning,
  kPreempted,  // Blocks freed; waits to recompute prompt + outputs so far.
  kFinishedStopped,  // EOS or a stop token.
  kFinishedLength,   // max_tokens or the context length.
  kFinishedAborted,
  kFinishedError,
};

bool IsFinished(RequestState state);
const char* RequestStateName(RequestState state);
// "stop", "length", "abort", "error"; "" while unfinished.
const char* FinishReason(RequestState state);

struct RequestTimes {
  absl::Time arrival = absl::InfinitePast();
  absl::Time first_scheduled = absl::InfinitePast();
  absl::Time first_token = absl::InfinitePast();
  absl::Time last_token = absl::InfinitePast();
  absl::Time finished = absl::InfinitePast();
};

// Top alternatives at one generated position (token, logprob), best first.
using TopLogprobs = std::vector<std::pair<int32_t, float>>;

struct Request {
  Request(std::string id, std::vector<int32_t> prompt, SamplingParams params)
      : request_id(std::move(id)),
        prompt_token_ids(std::move(prompt)),
        params(std::move(params)),
        sampler(this->params.ToSamplingConfig()) {}

  std::string request_id;
  std::vector<int32_t> prompt_token_ids;
  SamplingParams params;
  int priority = 0;  // Lower runs first under the priority policy.
  // The LoRA adapter (null and "" for the base model), held until the request
  // ends even if the adapter is removed or evicted meanwhile.
  std::string lora_name;
  std::shared_ptr<const worker::LoraAdapter> lora;
  // Extra prefix-cache key: 0 for the base model, else unique per loaded
  // adapter (LoraHandle::cache_key), so no cached block crosses adapters.
  uint64_t lora_key = 0;
  int64_t seq_no = 0;     // Admission order; tie-breaker after arrival.
  // Parallel sample (n > 1) other than the first: waits until the request
  // with this id has computed the prompt, then shares its full prompt blocks.
  std::string fork_parent_id;

  RequestState state = RequestState::kWaiting;
  std::vector<int32_t> output_token_ids;
  std::vector<float> output_logprobs;        // Per output token.
  std::vector<TopLogprobs> output_top_logprobs;  // Per output token when params.logprobs > 0.
  double cumulative_logprob = 0.0;
  std::optional<int32_t> stop_reason;  // The stop token id, if one ended it.
  // Per prompt position 1.. (params.prompt_logprobs set): the logprob of the
  // prompt token and the top alternatives, filled during prefill.
  std::vector<float> prompt_logprobs;
  std::vector<TopLogprobs> prompt_top_logprobs;
  // Tokens (prompt then outputs) whose K/V are in the cache. Reset to 0 on
  // preemption, so the prompt and outputs are recomputed.
  int64_t num_computed_tokens = 0;
  int64_t num_cached_prompt_tokens = 0;  // Prefix-cache hit at the last admission.
  int num_preemptions = 0;
  RequestTimes times;
  worker::Sampler sampler;  // Seeded per request; survives preemption.
  // Set iff params.constraint is: this sample's grammar state, following
  // output_token_ids (so it survives preemption and recompute).
  std::shared_ptr<structured_output::ConstraintMatcher> matcher;
  // Speculative decoding: this sequence's next draft length (adapted to how
  // many of its drafts are accepted); 0 until its first draft.
  int draft_length = 0;
  // How its n-gram drafts did (prices its next ones, acceptance_model.h).
  spec_decode::SequenceAcceptance spec_acceptance;

  int64_t num_tokens() const {
    return static_cast<int64_t>(prompt_token_ids.size() + output_token_ids.size());
  }
  int32_t token_at(int64_t i) const {
    const int64_t p = static_cast<int64_t>(prompt_token_ids.size());
    return i < p ? prompt_token_ids[i] : output_token_ids[i - p];
  }
  // All tokens, prompt first.
  std::vector<int32_t> AllTokens() const;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_REQUEST_H_
