// What CUDA devices this process can use. The CUDA backend is chosen at
// start-up only when ProbeCudaDevices() finds at least one device; anything
// else (no toolkit at build time, no driver, no GPU) means the CPU backend.
#ifndef RILL_KERNELS_CUDA_DEVICE_PROBE_H_
#define RILL_KERNELS_CUDA_DEVICE_PROBE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::kernels::cuda {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int64_t total_memory_bytes = 0;
};

// True when this binary was compiled with nvcc kernels linked in.
bool BuiltWithCuda();

// The usable devices, or UNAVAILABLE with the reason when none is: "no
// NVIDIA driver" without one, else the runtime's (e.g. "no CUDA-capable
// device").
absl::StatusOr<std::vector<CudaDeviceInfo>> ProbeCudaDevices();

// True when the NVIDIA driver library (libcuda.so.1) can be loaded: false on
// a machine without a GPU driver, where the CPU backend is the normal choice.
bool NvidiaDriverPresent();

// Runs a small kernel (vector add) on `device` and checks the result: proves
// the kernels in this binary match the device's architecture.
absl::Status RunDeviceSelfTest(int device);

// Versions of the linked CUDA runtime, cuBLAS and NCCL ("" when not built).
std::string LinkedLibraryVersions();

}  // namespace rill::kernels::cuda

#endif  // RILL_KERNELS_CUDA_DEVICE_PROBE_H_
