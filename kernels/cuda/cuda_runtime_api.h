// Plain-C++ wrappers over the CUDA runtime (memory, streams, graphs), so
// callers such as the checker need no CUDA headers and no nvcc. Every call
// returns 0 on success or a cudaError_t value; ErrorString() names it.
#ifndef RILL_KERNELS_CUDA_CUDA_RUNTIME_API_H_
#define RILL_KERNELS_CUDA_CUDA_RUNTIME_API_H_

#include <cstddef>

namespace rill::kernels::cuda {

using Stream = void*;     // cudaStream_t
using GraphExec = void*;  // cudaGraphExec_t

const char* ErrorString(int err);

// Device count, or -1 when the driver or runtime cannot be used.
int DeviceCountOrError();
int DeviceName(char* name, size_t len);
int MemInfo(size_t* free_bytes, size_t* total_bytes);

int DeviceAlloc(void** ptr, size_t bytes);
int DeviceFree(void* ptr);
int CopyToDevice(void* dst, const void* src, size_t bytes);
int CopyToHost(void* dst, const void* src, size_t bytes);
// Every byte 0xFF: NaN for bf16/f32, -1 for int32.
int Poison(void* ptr, size_t bytes, Stream stream);
int Memset(void* ptr, int byte, size_t bytes, Stream stream);

int StreamCreate(Stream* stream);
int StreamDestroy(Stream stream);
int StreamSync(Stream stream);
int LastLaunchError();

// Captures the work queued on `stream` between Begin and End into an
// executable graph; GraphLaunch replays it on the same stream.
int GraphCaptureBegin(Stream stream);
int GraphCaptureEnd(Stream stream, GraphExec* exec);
int GraphLaunch(GraphExec exec, Stream stream);
int GraphDestroy(GraphExec exec);

}  // namespace rill::kernels::cuda

#endif  // RILL_KERNELS_CUDA_CUDA_RUNTIME_API_H_
