#include "engine/logits_processor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "worker/sampler.h"

namespace rill::engine {

void ProcessLogits(const Request& r, const std::vector<int32_t>& eos_ids, float* logits,
                   int64_t vocab) {
  const SamplingParams& p = r.params;
  if (p.repetition_penalty != 1.0f) {
    absl::flat_hash_set<int32_t> seen(r.prompt_token_ids.begin(), r.prompt_token_ids.end());
    seen.insert(r.output_token_ids.begin(), r.output_token_ids.end());
    for (int32_t t : seen) {
      if (t < 0 || t >= vocab) continue;
      logits[t] = logits[t] > 0 ? logits[t] / p.repetition_penalty : logits[t] * p.repetition_penalty;
    }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    absl::flat_hash_map<int32_t, int> counts;
    for (int32_t t : r.output_token_ids) ++counts[t];
    for (const auto& [t, n] : counts) {
      if (t < 0 || t >= vocab) continue;
      logits[t] -= p.presence_penalty + p.frequency_penalty * n;
    }
  }
  for (const auto& [t, bias] : p.logit_bias) {
    if (t >= 0 && t < vocab) logits[t] += bias;
  }
  if (static_cast<int>(r.output_token_ids.size()) < p.min_tokens) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    if (!p.ignore_eos) {
      for (int32_t t : eos_ids) {
        if (t >= 0 && t < vocab) logits[t] = kNegInf;
      }
    }
    for (int32_t t : p.stop_token_ids) {
      if (t >= 0 && t < vocab) logits[t] = kNegInf;
    }
  }
}

float TokenLogprob(const float* logits, int64_t vocab, int32_t token) {
  return worker::LogProbOf(logits, vocab, token);
}

TopLogprobs TopKLogprobs(const float* logits, int64_t vocab, int k) {
  if (k <= 0 || vocab == 0) return {};
  return TopKLogprobs(logits, vocab, k, worker::LogSumExp(logits, vocab));
}

TopLogprobs TopKLogprobs(const float* logits, int64_t vocab, int k, float log_z) {
  TopLogprobs out;
  if (k <= 0 || vocab == 0) return out;
  std::vector<int32_t> ids;
  worker::TopKIds(logits, vocab, k, &ids);
  for (int32_t id : ids) out.emplace_back(id, logits[id] - log_z);
  return out;
}

}  // namespace rill::engine
