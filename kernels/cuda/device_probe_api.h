// Plain-C++ boundary between nvcc-compiled code and the rest of Rill: no absl
// or glog types cross it, so .cu files need only the CUDA headers.
#ifndef RILL_KERNELS_CUDA_DEVICE_PROBE_API_H_
#define RILL_KERNELS_CUDA_DEVICE_PROBE_API_H_

#include <cstddef>

namespace rill::kernels::cuda::internal {

// Returns the device count (>= 0) or -1 with the driver's message in `error`.
int DeviceCount(char* error, size_t error_len);

// Fills name/compute capability/memory of `device`; false with `error` on failure.
bool DeviceProperties(int device, char* name, size_t name_len, int* major, int* minor,
                      long long* total_memory, char* error, size_t error_len);

// Vector add of n elements on `device`; false with `error` on any mismatch.
bool VectorAddSelfTest(int device, int n, char* error, size_t error_len);

// cudart, cuBLAS and NCCL versions as integers.
void LibraryVersions(int* cudart, int* cublas, int* nccl);

}  // namespace rill::kernels::cuda::internal

#endif  // RILL_KERNELS_CUDA_DEVICE_PROBE_API_H_
