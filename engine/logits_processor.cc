#include "engine/logits_processor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "worker/sampler.h"
#include "worker/sampling_spec.h"

namespace rill::engine {

std::vector<worker::LogitEdit> LogitEditsFor(const Request& r, const std::vector<int32_t>& eos_ids,
                                             int64_t vocab) {
  const SamplingParams& p = r.params;
  const bool penalize = p.repetition_penalty != 1.0f;
  const bool count = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  const bool mask = static_cast<int>(r.output_token_ids.size()) < p.min_tokens;
  std::vector<worker::LogitEdit> edits;
  if (!penalize && !count && !mask && p.logit_bias.empty()) return edits;
  // Token -> its edit's index, so every change of one token lands in one
  // edit (applied in the documented order: repetition, penalties, bias, mask).
  absl::flat_hash_map<int32_t, size_t> at;
  auto edit = [&](int32_t t) -> worker::LogitEdit* {
    if (t < 0 || t >= vocab) return nullptr;
    auto [it, inserted] = at.try_emplace(t, edits.size());
    if (inserted) edits.emplace_back().token = t;
    return &edits[it->second];
  };
  if (penalize) {
    for (int32_t t : r.prompt_token_ids) {
      if (worker::LogitEdit* e = edit(t)) e->repetition = p.repetition_penalty;
    }
    for (int32_t t : r.output_token_ids) {
      if (worker::LogitEdit* e = edit(t)) e->repetition = p.repetition_penalty;
    }
  }
  if (count) {
    absl::flat_hash_map<int32_t, int> counts;
    for (int32_t t : r.output_token_ids) ++counts[t];
    for (const auto& [t, n] : counts) {
      if (worker::LogitEdit* e = edit(t)) e->subtract = p.presence_penalty + p.frequency_penalty * n;
    }
  }
  for (const auto& [t, bias] : p.logit_bias) {
    if (worker::LogitEdit* e = edit(t)) e->add = bias;
  }
  if (mask) {
    if (!p.ignore_eos) {
      for (int32_t t : eos_ids) {
        if (worker::LogitEdit* e = edit(t)) e->mask = true;
      }
    }
    for (int32_t t : p.stop_token_ids) {
      if (worker::LogitEdit* e = edit(t)) e->mask = true;
    }
  }
  std::sort(edits.begin(), edits.end(),
            [](const worker::LogitEdit& a, const worker::LogitEdit& b) { return a.token < b.token; });
  return edits;
}

void ProcessLogits(const Request& r, const std::vector<int32_t>& eos_ids, float* logits,
                   int64_t vocab) {
  worker::ApplyLogitEdits(LogitEditsFor(r, eos_ids, vocab), logits, vocab);
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
