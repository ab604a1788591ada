// CUDA build: asks the runtime (through device_probe_api.h) what is there.
#include "kernels/cuda/device_probe.h"

#include <dlfcn.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_probe_api.h"

namespace rill::kernels::cuda {

bool BuiltWithCuda() { return true; }

bool NvidiaDriverPresent() {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver == nullptr) return false;
  dlclose(driver);
  return true;
}

absl::StatusOr<std::vector<CudaDeviceInfo>> ProbeCudaDevices() {
  // Without a driver the runtime says "CUDA driver version is insufficient
  // for CUDA runtime version", which reads like an upgrade is needed.
  if (!NvidiaDriverPresent()) {
    return absl::UnavailableError(
        "no usable CUDA device: no NVIDIA driver on this machine (libcuda.so.1 not found)");
  }
  char error[512] = {0};
  int count = internal::DeviceCount(error, sizeof(error));
  if (count < 0) return absl::UnavailableError(absl::StrCat("no usable CUDA device: ", error));
  if (count == 0) return absl::UnavailableError("no usable CUDA device: device count is 0");
  std::vector<CudaDeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    CudaDeviceInfo info;
    info.index = i;
    char name[256] = {0};
    long long memory = 0;
    if (!internal::DeviceProperties(i, name, sizeof(name), &info.compute_major,
                                    &info.compute_minor, &memory, error, sizeof(error))) {
      return absl::UnavailableError(absl::StrCat("CUDA device ", i, ": ", error));
    }
    info.name = name;
    info.total_memory_bytes = memory;
    devices.push_back(info);
  }
  return devices;
}

absl::Status RunDeviceSelfTest(int device) {
  char error[512] = {0};
  if (!internal::VectorAddSelfTest(device, 1 << 20, error, sizeof(error))) {
    return absl::InternalError(absl::StrCat("CUDA self-test on device ", device, ": ", error));
  }
  return absl::OkStatus();
}

std::string LinkedLibraryVersions() {
  int cudart = 0, cublas = 0, nccl = 0;
  internal::LibraryVersions(&cudart, &cublas, &nccl);
  return absl::StrCat("cudart ", cudart, ", cublas ", cublas, ", nccl ", nccl);
}

}  // namespace rill::kernels::cuda
