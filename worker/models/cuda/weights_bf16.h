// Host-side weight preparation for the CUDA Llama: every checkpoint tensor is
// dequantized to float on the CPU (any GGUF type or safetensors dtype) and
// rounded once to bf16, the form the CUDA kernels read. Fused matrices are
// built by appending row blocks: q/k/v -> [q_dim + 2 * kv_dim][hidden] and
// gate/up -> [2 * ffn][hidden] (gate rows first, as SwiGlu expects).
// No CUDA here, so it is unit-tested on any machine.
#ifndef RILL_WORKER_MODELS_CUDA_WEIGHTS_BF16_H_
#define RILL_WORKER_MODELS_CUDA_WEIGHTS_BF16_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/loader/checkpoint.h"

namespace rill::worker {

// Round to nearest even; NaN stays a (quiet) NaN, infinities stay infinite.
uint16_t FloatToBf16(float f);
float Bf16ToFloat(uint16_t b);

// Appends the [rows][cols] matrix `name` (ggml ne = {cols, rows}) as bf16,
// row-major, to *out. Errors name the tensor (shape mismatch, unsupported type).
absl::Status AppendMatrixBf16(const worker::loader::Checkpoint& ckpt, const std::string& name,
                              int64_t rows, int64_t cols, std::vector<uint16_t>* out);

// Appends the n-element vector `name` (norm weight, bias) as bf16 to *out.
absl::Status AppendVectorBf16(const worker::loader::Checkpoint& ckpt, const std::string& name,
                              int64_t n, std::vector<uint16_t>* out);

// One decoder layer's weights as the CUDA forward uploads them.
struct LayerBf16 {
  std::vector<uint16_t> attn_norm, ffn_norm;  // [hidden]
  std::vector<uint16_t> qkv;                  // [q_dim + 2 * kv_dim][hidden]
  std::vector<uint16_t> qkv_bias;             // [q_dim + 2 * kv_dim], empty without bias
  std::vector<uint16_t> o;                    // [hidden][q_dim]
  std::vector<uint16_t> gate_up;              // [2 * ffn][hidden]
  std::vector<uint16_t> down;                 // [hidden][ffn]
};

// Layer `layer` of a Llama-family checkpoint ("blk.N." names).
absl::Status BuildLayerBf16(const worker::loader::Checkpoint& ckpt, int layer, LayerBf16* out);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_CUDA_WEIGHTS_BF16_H_
