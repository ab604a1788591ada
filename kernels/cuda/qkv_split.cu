// Splits the fused q/k/v projection ([tokens][q_dim + 2 * kv_dim], one GEMM)
// into the contiguous q, k and v tensors that RoPE, the KV-cache write and
// attention read, adding the optional bias (Qwen2) on the way.
#include "kernels/cuda/cuda_device_common.h"
#include "kernels/cuda/cuda_kernels.h"

namespace rill::kernels::cuda {
namespace {

using internal::bf16;
using internal::ToB;
using internal::ToF;

__global__ void SplitQkvKernel(const bf16* qkv, const bf16* bias, bf16* q, bf16* k, bf16* v,
                               int q_dim, int kv_dim, int64_t n) {
  const int width = q_dim + 2 * kv_dim;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / width;
    const int j = static_cast<int>(idx % width);
    // Without a bias the value is copied bit for bit.
    const bf16 y = bias ? ToB(ToF(qkv[idx]) + ToF(bias[j])) : qkv[idx];
    if (j < q_dim) {
      q[t * q_dim + j] = y;
    } else if (j < q_dim + kv_dim) {
      k[t * kv_dim + (j - q_dim)] = y;
    } else {
      v[t * kv_dim + (j - q_dim - kv_dim)] = y;
    }
  }
}

}  // namespace

int SplitQkv(const void* qkv, const void* bias, void* q, void* k, void* v, int tokens, int q_dim,
             int kv_dim, Stream stream) {
  if (tokens < 0 || q_dim <= 0 || kv_dim <= 0 || !qkv || !q || !k || !v) {
    return internal::kInvalid;
  }
  const int64_t n = static_cast<int64_t>(tokens) * (q_dim + 2 * static_cast<int64_t>(kv_dim));
  if (n == 0) return 0;
  const int64_t blocks = (n + 255) / 256;
  SplitQkvKernel<<<static_cast<int>(blocks < 65535 ? blocks : 65535), 256, 0,
                   static_cast<cudaStream_t>(stream)>>>(
      static_cast<const bf16*>(qkv), static_cast<const bf16*>(bias), static_cast<bf16*>(q),
      static_cast<bf16*>(k), static_cast<bf16*>(v), q_dim, kv_dim, n);
  return internal::LaunchStatus();
}

}  // namespace rill::kernels::cuda
