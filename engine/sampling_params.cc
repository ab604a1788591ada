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

SamplingParams SamplingParams::ForSample(int index) const {
  SamplingParams p = *this;
  p.n = 1;
  if (index > 0) {
    // splitmix64 finalizer over (seed, index): distinct, well-mixed streams.
    uint64_t z = seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(index + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    p.seed = z ^ (z >> 31);
  }
  return p;
}

absl::Status ValidateSamplingParams(const SamplingParams& p, int64_t vocab_size) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (p.n < 1 || p.n > kMaxSamplesPerRequest) {
    return bad("n must be in [1, ", kMaxSamplesPerRequest, "], got ", p.n);
  }
  if (p.max_tokens < 1) return bad("max_tokens must be at least 1, got ", p.max_tokens);
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens) {
    return bad("min_tokens must be in [0, max_tokens=", p.max_tokens, "], got ", p.min_tokens);
  }
  if (absl::Status s = worker::ValidateSamplingConfig(p.ToSamplingConfig()); !s.ok()) return s;
  if (p.logprobs < 0 || p.logprobs > kMaxLogprobs) {
    return bad("logprobs must be in [0, ", kMaxLogprobs, "], got ", p.logprobs);
  }
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty)) {
    return bad("repetition_penalty must be a finite number > 0, got ", p.repetition_penalty);
  }
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    return bad("presence_penalty must be in [-2, 2], got ", p.presence_penalty);
  }
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    return bad("frequency_penalty must be in [-2, 2], got ", p.frequency_penalty);
  }
  if (p.prompt_logprobs.has_value() && (*p.prompt_logprobs < 0 || *p.prompt_logprobs > kMaxLogprobs)) {
    return bad("prompt_logprobs must be in [0, ", kMaxLogprobs, "], got ", *p.prompt_logprobs);
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab_size) {
      return bad("logit_bias: ", id, " is not a token id (vocabulary of ", vocab_size, ")");
    }
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      return bad("logit_bias for token ", id, " must be in [-100, 100], got ", bias);
    }
  }
  if (p.stop.size() > 1024) return bad("stop: at most 1024 strings, got ", p.stop.size());
  for (const std::string& s : p.stop) {
    if (s.empty()) return bad("stop: strings must not be empty");
    if (s.size() > 1024) return bad("stop: strings must be at most 1024 bytes, got ", s.size());
  }
  for (int32_t id : p.stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return bad("stop_token_ids: ", id, " is not a token id (vocabulary of ", vocab_size, ")");
    }
  }
  return absl::OkStatus();
}

}  // namespace rill::engine
