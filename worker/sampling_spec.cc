#include "worker/sampling_spec.h"

#include <limits>

namespace rill::worker {

void ApplyLogitEdits(const std::vector<LogitEdit>& edits, float* logits, int64_t vocab) {
  for (const LogitEdit& e : edits) {
    if (e.token < 0 || e.token >= vocab) continue;
    float l = logits[e.token];
    if (e.repetition != 1.0f) l = l > 0.0f ? l / e.repetition : l * e.repetition;
    l -= e.subtract;
    l += e.add;
    logits[e.token] = e.mask ? -std::numeric_limits<float>::infinity() : l;
  }
}

}  // namespace rill::worker
