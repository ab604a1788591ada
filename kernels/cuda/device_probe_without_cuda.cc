// CPU-only build (no CUDA toolkit, or RILL_DISABLE_CUDA=1): there is never a
// device, and the reason says why.
#include "absl/status/status.h"
#include "kernels/cuda/device_probe.h"

namespace rill::kernels::cuda {

bool BuiltWithCuda() { return false; }

bool NvidiaDriverPresent() { return false; }

absl::StatusOr<std::vector<CudaDeviceInfo>> ProbeCudaDevices() {
  return absl::UnavailableError("this binary was built without CUDA");
}

absl::Status RunDeviceSelfTest(int) {
  return absl::UnavailableError("this binary was built without CUDA");
}

std::string LinkedLibraryVersions() { return ""; }

}  // namespace rill::kernels::cuda
