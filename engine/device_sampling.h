// Which of a step's rows an executor that samples on its device
// (ModelExecutor::samples_on_device) samples there, and what it is told.
// A row samples on the device only where the device gives what the host
// sampler would: the same edits (logits_processor.h), the same filters, and
// the same draw from the request's own generator. Everything else stays on
// the host, per row and explicitly (HostSamplingReason).
#ifndef RILL_ENGINE_DEVICE_SAMPLING_H_
#define RILL_ENGINE_DEVICE_SAMPLING_H_

#include <cstdint>
#include <vector>

#include "engine/request.h"
#include "worker/sampling_spec.h"

namespace rill::engine {

enum class HostSamplingReason {
  kNone,            // samples on the device
  kGrammar,         // structured output: the grammar bitmask is applied on the host
  kDraft,           // speculative verification needs every draft position's logits
  kPromptLogprobs,  // the chunk returns all its logits anyway
};

const char* HostSamplingReasonName(HostSamplingReason reason);

// Why row r (the one after its last computed token) samples on the host, or
// kNone. `verifies_draft`: its chunk verifies a draft; `all_logits`: its
// chunk returns every token's logits.
HostSamplingReason WhyHostSamples(const Request& r, bool verifies_draft, bool all_logits);

// What the device is told for r's next token. Takes one uniform from r's
// generator when temperature > 0, as the host sampler's draw would, so the
// request's random stream is the same whichever side samples each step.
// Engine loop thread (it advances r's sampler).
worker::DeviceSampling DeviceSamplingFor(Request* r, const std::vector<int32_t>& eos_ids,
                                         int64_t vocab_size);

}  // namespace rill::engine

#endif  // RILL_ENGINE_DEVICE_SAMPLING_H_
