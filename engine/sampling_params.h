// Per-request generation settings (n = 1), validated at admission so a bad
// request fails alone with an error naming the field.
#ifndef RILL_ENGINE_SAMPLING_PARAMS_H_
#define RILL_ENGINE_SAMPLING_PARAMS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/structured_output/constraint.h"
#include "worker/sampler.h"

namespace rill::engine {

// How RequestOutputs are streamed: every step's new tokens only (DELTA), the
// whole completion so far (CUMULATIVE), or one output at the end (FINAL_ONLY).
enum class OutputKind { kCumulative, kDelta, kFinalOnly };

// Per-request limits ValidateSamplingParams enforces (reported in
// ServerConfig.decoding).
inline constexpr int kMaxSamplesPerRequest = 64;  // n.
inline constexpr int kMaxLogprobs = 20;           // logprobs and prompt_logprobs.

struct SamplingParams {
  // Parallel samples of one prompt, in [1, 64]; they share the prompt's KV
  // blocks and sample i uses a seed derived from (seed, i).
  int n = 1;
  int max_tokens = 16;
  int min_tokens = 0;  // EOS and stop tokens are masked until this many.
  float temperature = 1.0f;  // 0 = greedy.
  float top_p = 1.0f;
  int top_k = 0;  // <= 0: all tokens.
  float min_p = 0.0f;
  uint64_t seed = 0;
  // Ends the request (finish_reason "stop", stop_reason = the id); the token
  // stays in token_ids.
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int logprobs = 0;  // Top alternatives reported per generated token (0 = none).
  // Top alternatives per prompt position, in [0, 20]; unset = none. Such a
  // request bypasses the prefix cache so every prompt position is computed.
  std::optional<int> prompt_logprobs;
  // Added to the logits of these token ids before sampling; in [-100, 100].
  std::map<int32_t, float> logit_bias;
  // Stop strings matched on the detokenized output (<= 1024 of <= 1024 bytes
  // each). The text is cut before the match unless include_stop_str_in_output.
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;
  // vLLM semantics: repetition divides positive / multiplies negative logits
  // of tokens seen in prompt or output; presence/frequency subtract from
  // logits of tokens in the output (once / per occurrence).
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  bool skip_special_tokens = true;
  OutputKind output_kind = OutputKind::kCumulative;
  // Structured outputs: every sample's text must match this (kNone: free).
  // Compiled off the engine loop before the request is scheduled.
  structured_output::Constraint constraint;

  worker::SamplingConfig ToSamplingConfig() const;
  // The params of parallel sample `index`: n = 1 and, for index > 0, a seed
  // mixed from (seed, index) so every sample is reproducible on its own.
  SamplingParams ForSample(int index) const;
};

// InvalidArgument naming the field; vocab_size bounds stop_token_ids.
absl::Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size);

}  // namespace rill::engine

#endif  // RILL_ENGINE_SAMPLING_PARAMS_H_
