// A sequence's next-token sampling as an executor that samples on its device
// is told it (engine ModelExecutor::samples_on_device), so only the token id
// and its logprob cross back instead of the logits row. The rules are the
// host path's (engine/logits_processor.h, worker/sampler.h): the logit edits
// first, then temperature / top-k / top-p / min-p, drawn with `uniform`.
#ifndef RILL_WORKER_SAMPLING_SPEC_H_
#define RILL_WORKER_SAMPLING_SPEC_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace rill::worker {

// A sparse change of one logit (repetition / presence / frequency penalties,
// logit_bias, min_tokens masking), applied in this order:
//   repetition != 1: l = l > 0 ? l / repetition : l * repetition
//   l -= subtract;  l += add;  mask: l = -inf
// The same layout as kernels/cuda LogitEdit, which applies it on the GPU.
struct LogitEdit {
  int32_t token = 0;
  float repetition = 1.0f;
  float subtract = 0.0f;  // presence_penalty + frequency_penalty * count
  float add = 0.0f;       // logit_bias
  bool mask = false;      // min_tokens: EOS and stop tokens impossible
};

// Applies edits (at most one per token) to logits[0, vocab) in place;
// tokens outside the vocabulary are skipped.
void ApplyLogitEdits(const std::vector<LogitEdit>& edits, float* logits, int64_t vocab);

struct DeviceSampling {
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 0;             // <= 0: all tokens
  float top_p = 1.0f;
  float min_p = 0.0f;
  // The draw in [0, 1) from the request's own generator (temperature > 0):
  // the value the host sampler would have scaled by the kept mass.
  double uniform = 0.0;
  // The draw walks the kept tokens by logit, highest first (the host
  // sampler's order when top_k filters), instead of in id order.
  bool descending_draw = false;
  // > 0: also return this many best tokens of the edited logits with their
  // logprobs (the host's TopKLogprobs order: best first, ties to lower ids).
  int top_logprobs = 0;
  std::vector<LogitEdit> edits;  // sorted by token, one per token
};

// What an executor returns for a sequence it sampled.
struct DeviceSampledToken {
  int32_t token = -1;
  float logprob = 0.0f;  // log-softmax of the edited logits (before temperature)
  std::vector<std::pair<int32_t, float>> top;  // DeviceSampling::top_logprobs of them
};

}  // namespace rill::worker

#endif  // RILL_WORKER_SAMPLING_SPEC_H_
