#include "engine/device_sampling.h"

#include "engine/logits_processor.h"
#include "worker/sampler.h"

namespace rill::engine {

const char* HostSamplingReasonName(HostSamplingReason reason) {
  switch (reason) {
    case HostSamplingReason::kNone:
      return "none";
    case HostSamplingReason::kGrammar:
      return "grammar";
    case HostSamplingReason::kDraft:
      return "draft";
    case HostSamplingReason::kPromptLogprobs:
      return "prompt_logprobs";
  }
  return "unknown";
}

HostSamplingReason WhyHostSamples(const Request& r, bool verifies_draft, bool all_logits) {
  const SamplingParams& p = r.params;
  if (r.matcher != nullptr || p.constraint.active()) return HostSamplingReason::kGrammar;
  if (verifies_draft) return HostSamplingReason::kDraft;
  if (all_logits) return HostSamplingReason::kPromptLogprobs;
  return HostSamplingReason::kNone;
}

worker::DeviceSampling DeviceSamplingFor(Request* r, const std::vector<int32_t>& eos_ids,
                                         int64_t vocab_size) {
  const SamplingParams& p = r->params;
  worker::DeviceSampling d;
  d.temperature = p.temperature;
  d.top_k = p.top_k;
  d.top_p = p.top_p;
  d.min_p = p.min_p;
  // The host sampler draws exactly once per token at temperature > 0
  // (uniform_real_distribution<double>(0, kept mass), i.e. this uniform
  // scaled) and never when greedy.
  if (p.temperature > 0.0f) d.uniform = r->sampler.Uniform();
  d.descending_draw =
      worker::DrawOrderOf(p.ToSamplingConfig(), vocab_size) == worker::DrawOrder::kDescending;
  d.top_logprobs = p.logprobs;
  d.edits = LogitEditsFor(*r, eos_ids, vocab_size);
  return d;
}

}  // namespace rill::engine
