// The per-sequence LoRA update of a projection inside a mixed batch: each
// token adds its own sequence's adapter's B (A x) to the projection output
// (a gathered low-rank matmul), tokens of base-model sequences are left
// untouched. Computed in f32, token by token in a fixed order, so a
// sequence's result never depends on what else is in the batch.
#ifndef RILL_WORKER_LORA_LORA_APPLY_H_
#define RILL_WORKER_LORA_LORA_APPLY_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/forward_batch.h"
#include "worker/lora/lora_adapter.h"

namespace rill::worker {

// Which adapter each token of the flattened batch (sequences in order, each
// sequence's tokens in order) uses; null for the base model.
class LoraTokenMap {
 public:
  explicit LoraTokenMap(const ForwardBatch& batch);

  // False when no sequence has an adapter: the forward skips every hook.
  bool any() const { return any_; }
  const LoraAdapter* adapter(int64_t token) const { return adapters_[token]; }

 private:
  std::vector<const LoraAdapter*> adapters_;
  bool any_ = false;
};

// InvalidArgument naming the sequence when an adapter was loaded for other
// model dimensions than (hidden_size, num_layers).
absl::Status CheckLoraAdapters(const ForwardBatch& batch, int64_t hidden_size, int64_t num_layers);

// y[i] += B (A x[i]) for tokens t0 + i, i < m, whose adapter targets
// (layer, module). x: [m][in] row-major, y: [m][out], with in/out the
// projection's (the adapter's weights carry them).
void ApplyLora(const LoraTokenMap& map, int64_t t0, int64_t m, int64_t layer, LoraModule module,
               const float* x, float* y, kernels::cpu::ThreadPool* pool);

}  // namespace rill::worker

#endif  // RILL_WORKER_LORA_LORA_APPLY_H_
