// The mixture-of-experts feed-forward block of Mixtral, Qwen2-MoE and
// Qwen3-MoE (ModelConfig::expert_count; the math is in checkpoint.h): a
// softmax router picks each token's top-k experts; every expert runs ONE
// matmul chain over all the step's tokens routed to it (gathered rows), and
// its outputs are scattered back, weighted, into those tokens' rows.
//
// Batch invariance: MatMul's per-row result does not depend on the number
// of rows or their order (quant_matmul.h), routing is per token, and a
// token's expert outputs are added in ascending expert order, so a token's
// result is bitwise the same whatever other tokens share the step or its
// experts.
//
// Tensor parallelism (TakeShard): every rank holds the same slice of every
// expert's intermediate features (rows of gate/up, columns of down; the
// shared expert's likewise), as the dense MLP is split. The router is whole
// on every rank and runs on the same (all-reduced) input in f32, so every
// rank routes each token identically; each rank's Forward then yields its
// partial sum, and the caller's one all-reduce per layer adds them. The
// routing weights and the shared expert's sigmoid gate (computed from the
// whole input) scale the partials linearly, so the sum is the unsharded
// result up to float rounding. Expert parallelism was not chosen: it would
// reorder each token's sum just as much, and leave ranks idle whenever the
// router favours one rank's experts.
#ifndef RILL_WORKER_MODELS_MOE_H_
#define RILL_WORKER_MODELS_MOE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/layers.h"
#include "worker/models/tp_plan.h"

namespace rill::worker {

// Scratch of MoeFeedForward::Forward, shared by a model's layers (one
// forward at a time), reused across steps.
struct MoeScratch {
  std::vector<float> router_logits;
  kernels::cpu::AlignedFloats rows, gate, up, down;
  std::vector<uint8_t> precise;
};

// One layer's experts. Bind, then (optionally) PackWith, then Forward; not
// thread-safe (the model's forward thread calls it).
class MoeFeedForward {
 public:
  // Binds layer `layer`'s router, experts and shared expert (their presence
  // and shapes were validated at load; errors land in `bind`).
  void Bind(TensorBinder* bind, const worker::loader::ModelConfig& config, int64_t layer);

  // Narrows every expert and the shared expert to part's feature slices
  // (after Bind, before PackWith). Column slices cut inside a quantization
  // block are dequantized into *storage, which the caller keeps.
  void TakeShard(const TpPartition& part,
                 std::vector<std::unique_ptr<kernels::cpu::AlignedFloats>>* storage);

  // Calls pack on every expert and shared-expert matrix (the router stays
  // as bound: it runs exact, see Forward).
  void PackWith(const std::function<void(kernels::cpu::WeightMatrix*)>& pack);

  // out[t] = MoE(x[t]) for n tokens of hidden_size (out is overwritten);
  // after TakeShard, this rank's partial sum of it.
  // precise: the int16 kernels' per-token mask (PrecisePositionMask), or
  // null. The router runs on f32 activations whatever the kernel plan, so
  // the 8-bit path's rounding does not move tokens between experts.
  void Forward(const float* x, int64_t n, float* out, kernels::cpu::ThreadPool* pool,
               const uint8_t* precise, MoeScratch* scratch) const;

 private:
  struct Expert {
    kernels::cpu::WeightMatrix gate, up, down;
  };
  // y[r] = down(silu(gate(x[r])) * up(x[r])) for m rows, in slices.
  void RunExpert(const Expert& e, const float* x, int64_t m, float* y,
                 kernels::cpu::ThreadPool* pool, const uint8_t* precise, MoeScratch* scratch) const;

  int64_t hidden_ = 0;
  int64_t top_k_ = 0;
  bool renormalize_ = false;
  kernels::cpu::WeightMatrix router_;  // [experts][hidden]
  std::vector<Expert> experts_;
  bool has_shared_ = false;
  Expert shared_;
  std::vector<float> shared_gate_;  // [hidden]
};

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_MOE_H_
