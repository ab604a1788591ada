#include <cstdio>
#include <cstring>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "kernels/cuda/device_probe_api.h"

namespace rill::kernels::cuda::internal {
namespace {

void CopyError(cudaError_t err, char* error, size_t error_len) {
  snprintf(error, error_len, "%s (%s)", cudaGetErrorString(err), cudaGetErrorName(err));
}

__global__ void VectorAdd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

}  // namespace

int DeviceCount(char* error, size_t error_len) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    CopyError(err, error, error_len);
    return -1;
  }
  return count;
}

bool DeviceProperties(int device, char* name, size_t name_len, int* major, int* minor,
                      long long* total_memory, char* error, size_t error_len) {
  cudaDeviceProp prop;
  cudaError_t err = cudaGetDeviceProperties(&prop, device);
  if (err != cudaSuccess) {
    CopyError(err, error, error_len);
    return false;
  }
  snprintf(name, name_len, "%s", prop.name);
  *major = prop.major;
  *minor = prop.minor;
  *total_memory = static_cast<long long>(prop.totalGlobalMem);
  return true;
}

bool VectorAddSelfTest(int device, int n, char* error, size_t error_len) {
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) {
    CopyError(err, error, error_len);
    return false;
  }
  std::vector<float> a(n), b(n), c(n, 0.0f);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.5f * i;
    b[i] = 1.0f - i;
  }
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  size_t bytes = sizeof(float) * n;
  bool ok = cudaMalloc(&da, bytes) == cudaSuccess && cudaMalloc(&db, bytes) == cudaSuccess &&
            cudaMalloc(&dc, bytes) == cudaSuccess &&
            cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess &&
            cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess;
  if (ok) {
    VectorAdd<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaMemcpy(c.data(), dc, bytes, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) {
      CopyError(err, error, error_len);
      ok = false;
    }
  } else {
    CopyError(cudaGetLastError(), error, error_len);
  }
  for (int i = 0; ok && i < n; ++i) {
    if (c[i] != a[i] + b[i]) {
      snprintf(error, error_len, "mismatch at %d: %f != %f", i, c[i], a[i] + b[i]);
      ok = false;
    }
  }
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return ok;
}

void LibraryVersions(int* cudart, int* cublas, int* nccl) {
  *cudart = 0;
  *cublas = 0;
  *nccl = 0;
  cudaRuntimeGetVersion(cudart);
  // cublasGetProperty needs no device, unlike cublasGetVersion(handle, ...).
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  *cublas = major * 10000 + minor * 100 + patch;
  ncclGetVersion(nccl);
}

}  // namespace rill::kernels::cuda::internal
