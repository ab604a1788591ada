// Per-request adjustments of one logits row before sampling (penalties,
// min_tokens masking) and the top-k logprobs report.
#ifndef RILL_ENGINE_LOGITS_PROCESSOR_H_
#define RILL_ENGINE_LOGITS_PROCESSOR_H_

#include <cstdint>
#include <vector>

#include "engine/request.h"
#include "worker/sampling_spec.h"

namespace rill::engine {

// Applies repetition / presence / frequency penalties, logit_bias, and while fewer than
// min_tokens outputs exist masks `stop_ids` (EOS unless ignored, and the
// request's stop tokens) to -inf. No-op for default params. It applies
// LogitEditsFor(...) (worker::ApplyLogitEdits), as the device sampler does.
void ProcessLogits(const Request& request, const std::vector<int32_t>& eos_ids, float* logits,
                   int64_t vocab_size);

// Those changes as sparse edits, one per token in [0, vocab_size), sorted by
// token; empty for default params.
std::vector<worker::LogitEdit> LogitEditsFor(const Request& request,
                                             const std::vector<int32_t>& eos_ids,
                                             int64_t vocab_size);

// The k most likely tokens with their log-softmax values, best first; ties
// go to the lower id.
// log_softmax(logits)[token].
float TokenLogprob(const float* logits, int64_t vocab_size, int32_t token);

TopLogprobs TopKLogprobs(const float* logits, int64_t vocab_size, int k);
// The same with the row's log-softmax denominator already known (the
// sampler's SampledToken::log_z), saving a pass over the vocabulary.
TopLogprobs TopKLogprobs(const float* logits, int64_t vocab_size, int k, float log_z);

}  // namespace rill::engine

#endif  // RILL_ENGINE_LOGITS_PROCESSOR_H_
