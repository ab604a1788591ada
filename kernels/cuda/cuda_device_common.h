// Small device helpers shared by the .cu files: bf16 conversion and block
// reductions. Internal to kernels/cuda.
#ifndef RILL_KERNELS_CUDA_CUDA_DEVICE_COMMON_H_
#define RILL_KERNELS_CUDA_CUDA_DEVICE_COMMON_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>

namespace rill::kernels::cuda::internal {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float ToF(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ bf16 ToB(float x) { return __float2bfloat16(x); }

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum/max; every thread gets the result. `scratch` holds >= 33
// floats of shared memory; blockDim.x is a multiple of 32.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return WarpSum(v);
}
__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -FLT_MAX;
  return WarpMax(v);
}

inline int Err(cudaError_t e) { return static_cast<int>(e); }
inline int LaunchStatus() { return Err(cudaGetLastError()); }
constexpr int kInvalid = static_cast<int>(cudaErrorInvalidValue);

}  // namespace rill::kernels::cuda::internal

#endif  // RILL_KERNELS_CUDA_CUDA_DEVICE_COMMON_H_
