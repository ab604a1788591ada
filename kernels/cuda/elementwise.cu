// Row and elementwise kernels of the Llama forward: RMSNorm (+ residual),
// RoPE, SwiGLU, GELU, embedding lookup and the KV-cache write.
#include "kernels/cuda/cuda_device_common.h"
#include "kernels/cuda/cuda_kernels.h"

namespace rill::kernels::cuda {
namespace {

using internal::bf16;
using internal::ToB;
using internal::ToF;

constexpr int kRowThreads = 256;

__global__ void RmsNormKernel(const bf16* x, bf16* residual, const bf16* w, bf16* out, int hidden,
                              float eps) {
  __shared__ float scratch[33];
  const size_t row = blockIdx.x;
  bf16* res = residual + row * hidden;
  const bf16* xr = x ? x + row * hidden : nullptr;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = ToF(res[i]);
    if (xr) {
      // Store the sum rounded to bf16 and normalize what was stored, so the
      // next layer's residual is exactly what this norm saw.
      bf16 sum = ToB(v + ToF(xr[i]));
      res[i] = sum;
      v = ToF(sum);
    }
    ss += v * v;
  }
  ss = internal::BlockSum(ss, scratch);
  const float inv = rsqrtf(ss / hidden + eps);
  bf16* o = out + row * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) o[i] = ToB(ToF(res[i]) * inv * ToF(w[i]));
}

__global__ void RopeKernel(bf16* q, bf16* k, const int32_t* pos, const float* inv_freq, int q_heads,
                           int kv_heads, int head_dim, int rotary_dim, bool neox) {
  const int t = blockIdx.x;
  const int half = rotary_dim / 2;
  const float p = static_cast<float>(pos[t]);
  const int pairs = (q_heads + kv_heads) * half;
  for (int idx = threadIdx.x; idx < pairs; idx += blockDim.x) {
    const int head = idx / half, i = idx % half;
    bf16* base = head < q_heads
                     ? q + (static_cast<size_t>(t) * q_heads + head) * head_dim
                     : k + (static_cast<size_t>(t) * kv_heads + head - q_heads) * head_dim;
    const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    float s, c;
    sincosf(p * inv_freq[i], &s, &c);
    const float x0 = ToF(base[a]), x1 = ToF(base[b]);
    base[a] = ToB(x0 * c - x1 * s);
    base[b] = ToB(x1 * c + x0 * s);
  }
}

__global__ void SwiGluKernel(const bf16* gu, bf16* out, int ffn, int64_t n) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx / ffn, i = idx % ffn;
    const float g = ToF(gu[r * 2 * ffn + i]), u = ToF(gu[r * 2 * ffn + ffn + i]);
    out[idx] = ToB(g / (1.0f + __expf(-g)) * u);
  }
}

__global__ void GeluKernel(const bf16* in, bf16* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = ToF(in[i]);
    out[i] = ToB(0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x))));
  }
}

__global__ void EmbeddingKernel(const int32_t* tokens, const bf16* table, bf16* out, int hidden,
                                int vocab) {
  const int t = blockIdx.x;
  const int id = tokens[t];
  bf16* o = out + static_cast<size_t>(t) * hidden;
  const bool valid = id >= 0 && id < vocab;
  const bf16* row = table + static_cast<size_t>(valid ? id : 0) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) o[i] = valid ? row[i] : ToB(0.0f);
}

__global__ void KvWriteKernel(const bf16* k, const bf16* v, bf16* kc, bf16* vc,
                              const int32_t* slots, int width) {
  const int t = blockIdx.x;
  const int slot = slots[t];
  if (slot < 0) return;
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    kc[static_cast<size_t>(slot) * width + i] = k[static_cast<size_t>(t) * width + i];
    vc[static_cast<size_t>(slot) * width + i] = v[static_cast<size_t>(t) * width + i];
  }
}

int GridFor(int64_t n) {
  int64_t blocks = (n + 255) / 256;
  return static_cast<int>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}
cudaStream_t S(Stream s) { return static_cast<cudaStream_t>(s); }

}  // namespace

int RmsNormResidual(const void* x, void* residual, const void* weight, void* out, int rows,
                    int hidden, float eps, Stream stream) {
  if (rows < 0 || hidden <= 0 || !residual || !weight || !out) return internal::kInvalid;
  if (rows == 0) return 0;
  RmsNormKernel<<<rows, kRowThreads, 0, S(stream)>>>(
      static_cast<const bf16*>(x), static_cast<bf16*>(residual), static_cast<const bf16*>(weight),
      static_cast<bf16*>(out), hidden, eps);
  return internal::LaunchStatus();
}

int Rope(void* q, void* k, const int32_t* positions, const float* inv_freq, int tokens, int q_heads,
         int kv_heads, int head_dim, int rotary_dim, bool neox, Stream stream) {
  if (tokens < 0 || rotary_dim <= 0 || rotary_dim % 2 || rotary_dim > head_dim) {
    return internal::kInvalid;
  }
  if (tokens == 0) return 0;
  RopeKernel<<<tokens, 128, 0, S(stream)>>>(static_cast<bf16*>(q), static_cast<bf16*>(k), positions,
                                            inv_freq, q_heads, kv_heads, head_dim, rotary_dim,
                                            neox);
  return internal::LaunchStatus();
}

int SwiGlu(const void* gate_up, void* out, int rows, int ffn, Stream stream) {
  if (rows < 0 || ffn <= 0) return internal::kInvalid;
  const int64_t n = static_cast<int64_t>(rows) * ffn;
  if (n == 0) return 0;
  SwiGluKernel<<<GridFor(n), 256, 0, S(stream)>>>(static_cast<const bf16*>(gate_up),
                                                  static_cast<bf16*>(out), ffn, n);
  return internal::LaunchStatus();
}

int Gelu(const void* in, void* out, int64_t n, Stream stream) {
  if (n < 0) return internal::kInvalid;
  if (n == 0) return 0;
  GeluKernel<<<GridFor(n), 256, 0, S(stream)>>>(static_cast<const bf16*>(in),
                                                static_cast<bf16*>(out), n);
  return internal::LaunchStatus();
}

int EmbeddingLookup(const int32_t* tokens, const void* table, void* out, int n, int hidden,
                    int vocab, Stream stream) {
  if (n < 0 || hidden <= 0 || vocab <= 0) return internal::kInvalid;
  if (n == 0) return 0;
  EmbeddingKernel<<<n, kRowThreads, 0, S(stream)>>>(tokens, static_cast<const bf16*>(table),
                                                    static_cast<bf16*>(out), hidden, vocab);
  return internal::LaunchStatus();
}

int KvCacheWrite(const void* k, const void* v, void* k_cache, void* v_cache,
                 const int32_t* slot_mapping, int tokens, int kv_heads, int head_dim,
                 Stream stream) {
  if (tokens < 0 || kv_heads <= 0 || head_dim <= 0) return internal::kInvalid;
  if (tokens == 0) return 0;
  KvWriteKernel<<<tokens, 128, 0, S(stream)>>>(
      static_cast<const bf16*>(k), static_cast<const bf16*>(v), static_cast<bf16*>(k_cache),
      static_cast<bf16*>(v_cache), slot_mapping, kv_heads * head_dim);
  return internal::LaunchStatus();
}

}  // namespace rill::kernels::cuda
