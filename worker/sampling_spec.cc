#include "worker/sampling_spec.h"

#include "kernels/cuda/sampling_rng.h"

namespace rill::worker {

void ApplyLogitEdits(const std::vector<LogitEdit>& edits, float* logits, int64_t vocab) {
  for (const LogitEdit& e : edits) {
    if (e.token < 0 || e.token >= vocab) continue;
    // The GPU kernel's own rule, so host and device rows get the same bits.
    logits[e.token] = ::rill::kernels::cuda::EditedLogit(logits[e.token], e.repetition,
                                                         e.subtract, e.add, e.mask);
  }
}

}  // namespace rill::worker
