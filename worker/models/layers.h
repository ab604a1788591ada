// Building blocks shared by the model definitions: binding checkpoint tensors
// to kernel operands, the flattened view of a ragged batch, embedding lookup,
// paged-KV writes, attention per sequence, and the logits head.
#ifndef RILL_WORKER_MODELS_LAYERS_H_
#define RILL_WORKER_MODELS_LAYERS_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/kernel_plan.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/forward_batch.h"
#include "worker/kv_cache.h"
#include "worker/loader/checkpoint.h"

namespace rill::worker {

// A weight matrix [rows = out features][cols = in features] straight from the
// checkpoint's memory (quantized blocks are never dequantized at load).
absl::StatusOr<kernels::cpu::WeightMatrix> BindMatrix(const worker::loader::Checkpoint& ckpt,
                                                      const std::string& name, int64_t rows,
                                                      int64_t cols, bool float_activations);

// Repacks w for the plan's kernels (kernels::cpu::PackForKernelPlan) and, when it
// packed, drops the file pages of w's rows from RSS (the packed copy is what
// MatMul and a tied embedding read from then on). Returns whether it packed.
bool PackForKernelPlan(const kernels::cpu::KernelPlan& plan, const worker::loader::Checkpoint& ckpt,
                       kernels::cpu::WeightMatrix* w);

// Per token, whether MatMul gives it the int16 kernels' two-pass activations
// (packed_matmul.h): the first kPrecisePositions positions of a sequence,
// which every later token attends to (attention sinks), so their rounding
// reaches all positions (one pass: up to 1.2e-2 relative logit error seen at
// position 1; two passes there: ~1e-4 typical). Empty (MatMul's null mask)
// unless the plan runs the int16 kernels, the only ones that read it.
inline constexpr int32_t kPrecisePositions = 4;
std::vector<uint8_t> PrecisePositionMask(const kernels::cpu::KernelPlan& plan,
                                         const std::vector<int32_t>& positions);

// A vector of n floats (norm weights, biases), converted to f32 if stored as
// f16/bf16. NotFound when absent.
absl::StatusOr<std::vector<float>> LoadVector(const worker::loader::Checkpoint& ckpt,
                                              const std::string& name, int64_t n);

// Binds a model's tensors into its members, keeping the first error (in call
// order) so a model lists its tensors without checking every call. After an
// error, later calls do nothing.
class TensorBinder {
 public:
  TensorBinder(const worker::loader::Checkpoint& ckpt, bool float_activations)
      : ckpt_(ckpt), float_activations_(float_activations) {}

  void Matrix(const std::string& name, int64_t rows, int64_t cols, kernels::cpu::WeightMatrix* w);
  void Vector(const std::string& name, int64_t n, std::vector<float>* v);
  const absl::Status& status() const { return status_; }
  // InvalidArgument naming the first per-layer tensor ("blk.*") of the
  // checkpoint that nothing bound: a weight the model would silently ignore
  // (e.g. an o_proj or MLP bias the architecture does not have).
  absl::Status CheckEveryLayerTensorBound() const;

 private:
  const worker::loader::Checkpoint& ckpt_;
  const bool float_activations_;
  absl::Status status_;
  std::set<std::string> bound_;
};

// The batch flattened token by token.
struct BatchLayout {
  int64_t num_tokens = 0;
  std::vector<int32_t> tokens;     // [num_tokens]
  std::vector<int32_t> positions;  // [num_tokens]
  std::vector<int64_t> seq_begin;  // [num_sequences + 1] offsets into tokens
  // Token rows whose logits are wanted, in output order, and per sequence how many.
  std::vector<int64_t> logit_rows;
};
BatchLayout LayoutBatch(const ForwardBatch& batch);

// x[t] = row tokens[t] of the embedding table, as floats.
void EmbedTokens(const kernels::cpu::WeightMatrix& table, const std::vector<int32_t>& tokens,
                 float* x, kernels::cpu::ThreadPool* pool);

// Stores each token's K and V rows ([num_tokens][kv_dim]) into the layer's
// blocks at its position.
void WriteKv(const ForwardBatch& batch, const BatchLayout& layout, int layer, const float* k,
             const float* v, PagedKvCache* cache);

// Causal attention of every sequence's new tokens over its cached context
// (including the tokens just written). q/out: [num_tokens][num_heads * head_dim].
// Per-layer attention variants (the defaults: plain causal attention).
struct AttentionOptions {
  int64_t sliding_window = 0;  // > 0: only that many most recent positions (itself included)
  float scale = 0.0f;          // 0: 1 / sqrt(head_dim)
  float logit_softcap = 0.0f;  // > 0: scores -> cap * tanh(s / cap)
};
void AttendAll(const ForwardBatch& batch, const BatchLayout& layout, int layer, const float* q,
               int num_heads, PagedKvCache* cache, float* out, kernels::cpu::ThreadPool* pool,
               const AttentionOptions& options = {});

// A rotary embedding as kernels::cpu::Rope applies it: the inverse frequency
// of each pair i < RopeDim() / 2, and the factor cos and sin are multiplied
// by (LongRoPE's attention factor; 1 otherwise).
struct RotaryTable {
  std::vector<float> inv_freq;
  float mscale = 1.0f;
};
// The table of the layers that use the config's main RoPE (local = false:
// rope_theta, rope_scaling) or Gemma 3's local one (local_rope_theta,
// local_rope_scaling), over RopeDim() features.
absl::StatusOr<RotaryTable> RotaryTableFor(const worker::loader::ModelConfig& cfg, bool local);

// RotaryTableFor(cfg, false).inv_freq, for backends that refuse LongRoPE.
absl::StatusOr<std::vector<float>> RopeInverseFrequencies(const worker::loader::ModelConfig& cfg);

// x[r] += bias for each of n_rows rows of width dim.
void AddBiasRows(float* x, const float* bias, int64_t n_rows, int64_t dim);

// x[t] += delta[t] (skipped when delta is null), then out[t] = RmsNorm(x[t])
// (skipped when weight is null), for n_tokens rows of dim: a residual add
// and the next norm in one pass, in parallel over tokens when the rows are
// many enough to pay for the dispatch. Bitwise the same as kernels::cpu::Add then
// kernels::cpu::RmsNorm, whatever the pool.
void AddRmsNorm(float* x, const float* delta, const float* weight, int64_t n_tokens, int64_t dim,
                float eps, float* out, kernels::cpu::ThreadPool* pool);

// kernels::cpu::SwiGlu over n elements, in parallel (in 64-float blocks, so each
// element takes the same vector or scalar path as one serial call) when
// large enough. Bitwise the same as kernels::cpu::SwiGlu.
void SwiGluParallel(const float* gate, const float* up, int64_t n, float* out,
                    kernels::cpu::ThreadPool* pool);

// out = gelu_tanh(gate) * up over n elements (Gemma's GeGLU), in parallel
// blocks; each element's result does not depend on the blocking.
void GeGluParallel(const float* gate, const float* up, int64_t n, float* out,
                   kernels::cpu::ThreadPool* pool);

// x -> cap * tanh(x / cap) over every logit row (Gemma 2's final cap).
void SoftCapLogits(float cap, ForwardOutput* out);

// The rows of `hidden` ([num_tokens][width]) named by layout.logit_rows.
std::vector<float> GatherLogitRows(const BatchLayout& layout, const float* hidden,
                                   int64_t width);

// out->logits[s] = head(rows of sequence s); rows as from GatherLogitRows
// (after the final norm).
void ProjectLogits(const ForwardBatch& batch, const std::vector<float>& rows,
                   const kernels::cpu::WeightMatrix& head, ForwardOutput* out,
                   kernels::cpu::ThreadPool* pool);

// out->hidden[s] = final_norm(rows of sequence s) for each sequence with
// return_hidden, empty for the others. `x`: [num_tokens][width] before the
// final norm; final_norm(rows, n) normalizes n rows in place.
void EmitHiddenStates(const ForwardBatch& batch, const BatchLayout& layout, const float* x,
                      int64_t width, const std::function<void(float*, int64_t)>& final_norm,
                      ForwardOutput* out);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_LAYERS_H_
