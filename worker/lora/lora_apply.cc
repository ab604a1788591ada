#include "worker/lora/lora_apply.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rill::worker {

LoraTokenMap::LoraTokenMap(const ForwardBatch& batch) {
  for (const SequenceChunk& seq : batch.sequences) {
    const LoraAdapter* a = seq.lora.get();
    any_ = any_ || a != nullptr;
    adapters_.insert(adapters_.end(), seq.tokens.size(), a);
  }
}

absl::Status CheckLoraAdapters(const ForwardBatch& batch, int64_t hidden_size, int64_t num_layers) {
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const LoraAdapter* a = batch.sequences[s].lora.get();
    if (a == nullptr) continue;
    if (a->hidden_size != hidden_size || a->num_layers != num_layers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", s, ": LoRA adapter ", a->path, " was loaded for a model of hidden size ",
          a->hidden_size, " and ", a->num_layers, " layers, not this one (", hidden_size, ", ",
          num_layers, ")"));
    }
  }
  return absl::OkStatus();
}

void ApplyLora(const LoraTokenMap& map, int64_t t0, int64_t m, int64_t layer, LoraModule module,
               const float* x, float* y, kernels::cpu::ThreadPool* pool) {
  if (!map.any()) return;
  kernels::cpu::ParallelFor(pool, m, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> ax, delta;
    for (int64_t i = begin; i < end; ++i) {
      const LoraAdapter* a = map.adapter(t0 + i);
      if (a == nullptr) continue;
      const LoraWeights& w = a->weights(layer, module);
      if (w.empty()) continue;
      const int64_t r = a->rank, in = w.in, out = w.out;
      const float* xi = x + i * in;
      // Both products run over independent lanes (rank, then output
      // features) in a fixed order: vectorizable, and the same for a token
      // whatever else is in the batch.
      ax.assign(r, 0.0f);
      for (int64_t k = 0; k < in; ++k) {
        const float xk = xi[k];
        const float* at = w.a.data() + k * r;
        for (int64_t j = 0; j < r; ++j) ax[j] += at[j] * xk;
      }
      delta.assign(out, 0.0f);
      for (int64_t j = 0; j < r; ++j) {
        const float aj = ax[j];
        const float* bt = w.b.data() + j * out;
        for (int64_t o = 0; o < out; ++o) delta[o] += bt[o] * aj;
      }
      float* yi = y + i * out;
      for (int64_t o = 0; o < out; ++o) yi[o] += delta[o];
    }
  });
}

}  // namespace rill::worker
