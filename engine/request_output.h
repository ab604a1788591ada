// What callers of AsyncLLMEngine receive per request, vLLM-style.
#ifndef RILL_ENGINE_REQUEST_OUTPUT_H_
#define RILL_ENGINE_REQUEST_OUTPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "engine/request.h"

namespace rill::engine {

struct CompletionOutput {
  int index = 0;
  // DELTA: this output's new text / tokens; CUMULATIVE and FINAL_ONLY: all so far.
  std::string text;
  std::vector<int32_t> token_ids;
  double cumulative_logprob = 0.0;  // Always over the whole completion.
  std::vector<float> logprobs;            // Per token in token_ids (sampled token).
  std::vector<TopLogprobs> top_logprobs;  // Per token when params.logprobs > 0.
  std::string finish_reason;              // "stop", "length", "abort", "error"; "" while running.
  std::optional<int32_t> stop_reason;     // The stop token id that ended it.
};

struct RequestMetrics {
  absl::Time arrival_time = absl::InfinitePast();
  absl::Time first_scheduled_time = absl::InfinitePast();
  absl::Time first_token_time = absl::InfinitePast();
  absl::Time last_token_time = absl::InfinitePast();
  absl::Time finished_time = absl::InfinitePast();
  int64_t num_cached_tokens = 0;  // Prompt tokens served by the prefix cache.
  int num_preemptions = 0;
};

struct RequestOutput {
  std::string request_id;
  std::string prompt;  // When the request came as text.
  std::vector<int32_t> prompt_token_ids;
  std::vector<CompletionOutput> outputs;  // n = 1: one entry.
  bool finished = false;
  std::string error;  // Cause of finish_reason "error".
  RequestMetrics metrics;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_REQUEST_OUTPUT_H_
