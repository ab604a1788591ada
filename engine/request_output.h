// What callers of AsyncLLMEngine receive per request, vLLM-style.
#ifndef RILL_ENGINE_REQUEST_OUTPUT_H_
#define RILL_ENGINE_REQUEST_OUTPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
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
  // The stop string (SamplingParams.stop) that ended it; text is cut before
  // it unless include_stop_str_in_output.
  std::optional<std::string> stop_string;
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
  // CUMULATIVE / FINAL_ONLY: one entry per sample (index 0..n-1); DELTA: the
  // sample(s) that changed in this output.
  std::vector<CompletionOutput> outputs;
  // params.prompt_logprobs: per prompt position 1..P-1 the prompt token's
  // logprob and top alternatives (position 0 has none); in the first output
  // that carries tokens, and in every CUMULATIVE / FINAL_ONLY output after.
  std::vector<float> prompt_logprobs;
  std::vector<TopLogprobs> prompt_top_logprobs;
  bool finished = false;
  absl::Status error;  // Cause of finish_reason "error" (its code reaches the client).
  RequestMetrics metrics;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_REQUEST_OUTPUT_H_
