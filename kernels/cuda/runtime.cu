// cuda_runtime_api.h over the CUDA runtime.
#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/cuda/cuda_runtime_api.h"

namespace rill::kernels::cuda {
namespace {
int E(cudaError_t e) { return static_cast<int>(e); }
cudaStream_t S(Stream s) { return static_cast<cudaStream_t>(s); }
}  // namespace

const char* ErrorString(int err) {
  if (err >= 1000) return "cuBLAS error (status = code - 1000)";
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}

int DeviceCountOrError() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return -1;
  }
  return n;
}

int DeviceName(char* name, size_t len) {
  cudaDeviceProp prop;
  cudaError_t e = cudaGetDeviceProperties(&prop, 0);
  if (e == cudaSuccess) snprintf(name, len, "%s (sm_%d%d)", prop.name, prop.major, prop.minor);
  return E(e);
}

int MemInfo(size_t* free_bytes, size_t* total_bytes) {
  return E(cudaMemGetInfo(free_bytes, total_bytes));
}
int DeviceAlloc(void** ptr, size_t bytes) { return E(cudaMalloc(ptr, bytes)); }
int DeviceFree(void* ptr) { return E(cudaFree(ptr)); }
int CopyToDevice(void* dst, const void* src, size_t bytes) {
  return E(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
int CopyToHost(void* dst, const void* src, size_t bytes) {
  return E(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
int Poison(void* ptr, size_t bytes, Stream stream) {
  return E(cudaMemsetAsync(ptr, 0xFF, bytes, S(stream)));
}
int Memset(void* ptr, int byte, size_t bytes, Stream stream) {
  return E(cudaMemsetAsync(ptr, byte, bytes, S(stream)));
}
int StreamCreate(Stream* stream) {
  cudaStream_t s = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  *stream = s;
  return E(e);
}
int StreamDestroy(Stream stream) { return E(cudaStreamDestroy(S(stream))); }
int StreamSync(Stream stream) { return E(cudaStreamSynchronize(S(stream))); }
int LastLaunchError() { return E(cudaGetLastError()); }

int GraphCaptureBegin(Stream stream) {
  return E(cudaStreamBeginCapture(S(stream), cudaStreamCaptureModeThreadLocal));
}
int GraphCaptureEnd(Stream stream, GraphExec* exec) {
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(S(stream), &graph);
  if (e != cudaSuccess) return E(e);
  cudaGraphExec_t ge = nullptr;
  e = cudaGraphInstantiate(&ge, graph, 0);
  cudaGraphDestroy(graph);
  *exec = ge;
  return E(e);
}
int GraphLaunch(GraphExec exec, Stream stream) {
  return E(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), S(stream)));
}
int GraphDestroy(GraphExec exec) {
  return E(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)));
}

}  // namespace rill::kernels::cuda
