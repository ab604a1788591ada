#include "engine/sampling_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace rill::engine {

worker::SamplingConfig SamplingParams::ToSamplingConfig() const {
  worker::SamplingConfig c;
  c.temperature = temperature;
  c.top_k = top_k;
  c.top_p = top_p;
  c.min_p = min_p;
  c.seed = seed;
  return c;
}

absl::Status ValidateSamplingParams(const SamplingParams& p, int64_t vocab_size) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (p.n != 1) return bad("n must be 1, got ", p.n);
  if (p.max_tokens < 1) return bad("max_tokens must be at least 1, got ", p.max_tokens);
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens) {
    return bad("min_tokens must be in [0, max_tokens=", p.max_tokens, "], got ", p.min_tokens);
  }
  if (absl::Status s = worker::ValidateSamplingConfig(p.ToSamplingConfig()); !s.ok()) return s;
  if (p.logprobs < 0 || p.logprobs > 20) return bad("logprobs must be in [0, 20], got ", p.logprobs);
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty)) {
    return bad("repetition_penalty must be a finite number > 0, got ", p.repetition_penalty);
  }
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    return bad("presence_penalty must be in [-2, 2], got ", p.presence_penalty);
  }
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    return bad("frequency_penalty must be in [-2, 2], got ", p.frequency_penalty);
  }
  for (int32_t id : p.stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return bad("stop_token_ids: ", id, " is not a token id (vocabulary of ", vocab_size, ")");
    }
  }
  return absl::OkStatus();
}

}  // namespace rill::engine
