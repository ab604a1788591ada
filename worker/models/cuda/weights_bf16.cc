#include "worker/models/cuda/weights_bf16.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/quant_types.h"
#include "worker/models/layers.h"

namespace rill::worker {

uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  // Adding 0x7fff plus the lowest kept bit rounds half to even; an overflow
  // past the largest finite bf16 correctly becomes infinity.
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float Bf16ToFloat(uint16_t b) { return kernels::cpu::BF16ToF32(b); }

absl::Status AppendMatrixBf16(const worker::loader::Checkpoint& ckpt, const std::string& name,
                              int64_t rows, int64_t cols, std::vector<uint16_t>* out) {
  // BindMatrix checks the shape, the type and the byte size against rows/cols.
  absl::StatusOr<kernels::cpu::WeightMatrix> w =
      BindMatrix(ckpt, name, rows, cols, /*float_activations=*/true);
  if (!w.ok()) return w.status();
  std::vector<float> row(cols);
  const size_t base = out->size();
  out->resize(base + static_cast<size_t>(rows) * cols);
  uint16_t* dst = out->data() + base;
  const uint8_t* src = static_cast<const uint8_t*>(w->data);
  for (int64_t r = 0; r < rows; ++r) {
    kernels::cpu::DequantizeRow(w->type, src + static_cast<size_t>(r) * w->row_stride_bytes,
                                row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) dst[static_cast<size_t>(r) * cols + c] = FloatToBf16(row[c]);
  }
  return absl::OkStatus();
}

absl::Status AppendVectorBf16(const worker::loader::Checkpoint& ckpt, const std::string& name,
                              int64_t n, std::vector<uint16_t>* out) {
  absl::StatusOr<std::vector<float>> v = LoadVector(ckpt, name, n);
  if (!v.ok()) return v.status();
  for (float x : *v) out->push_back(FloatToBf16(x));
  return absl::OkStatus();
}

absl::Status BuildLayerBf16(const worker::loader::Checkpoint& ckpt, int layer, LayerBf16* out) {
  const worker::loader::ModelConfig& c = ckpt.config();
  const int64_t h = c.hidden_size, qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim,
                f = c.intermediate_size;
  const std::string p = absl::StrCat("blk.", layer, ".");
  *out = LayerBf16();
  absl::Status s = AppendVectorBf16(ckpt, p + "attn_norm", h, &out->attn_norm);
  if (s.ok()) s = AppendVectorBf16(ckpt, p + "ffn_norm", h, &out->ffn_norm);
  out->qkv.reserve(static_cast<size_t>(qd + 2 * kvd) * h);
  if (s.ok()) s = AppendMatrixBf16(ckpt, p + "attn_q", qd, h, &out->qkv);
  if (s.ok()) s = AppendMatrixBf16(ckpt, p + "attn_k", kvd, h, &out->qkv);
  if (s.ok()) s = AppendMatrixBf16(ckpt, p + "attn_v", kvd, h, &out->qkv);
  if (s.ok()) s = AppendMatrixBf16(ckpt, p + "attn_output", h, qd, &out->o);
  out->gate_up.reserve(static_cast<size_t>(2 * f) * h);
  if (s.ok()) s = AppendMatrixBf16(ckpt, p + "ffn_gate", f, h, &out->gate_up);
  if (s.ok()) s = AppendMatrixBf16(ckpt, p + "ffn_up", f, h, &out->gate_up);
  if (s.ok()) s = AppendMatrixBf16(ckpt, p + "ffn_down", h, f, &out->down);
  // Biases come as a set (Qwen2), like the CPU model reads them.
  if (s.ok() && ckpt.Find(p + "attn_q.bias") != nullptr) {
    s = AppendVectorBf16(ckpt, p + "attn_q.bias", qd, &out->qkv_bias);
    if (s.ok()) s = AppendVectorBf16(ckpt, p + "attn_k.bias", kvd, &out->qkv_bias);
    if (s.ok()) s = AppendVectorBf16(ckpt, p + "attn_v.bias", kvd, &out->qkv_bias);
  }
  return s;
}

}  // namespace rill::worker
