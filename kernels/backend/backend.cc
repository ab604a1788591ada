#include "kernels/backend/backend.h"

#include <glog/logging.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_probe.h"

namespace rill::kernels::backend {

const char* BackendName(BackendKind kind) {
  return kind == BackendKind::kCuda ? "cuda" : "cpu";
}

absl::StatusOr<BackendChoice> ChooseBackend(const std::string& requested) {
  if (requested == "cpu") return BackendChoice{BackendKind::kCpu, "CPU backend (requested)"};
  if (requested != "auto" && requested != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown backend '", requested, "': expected auto, cpu or cuda"));
  }
  absl::StatusOr<std::vector<kernels::cuda::CudaDeviceInfo>> devices =
      kernels::cuda::ProbeCudaDevices();
  if (devices.ok()) {
    const kernels::cuda::CudaDeviceInfo& d = devices->front();
    return BackendChoice{BackendKind::kCuda,
                         absl::StrCat("CUDA backend on device 0 (", d.name, ", sm_",
                                      d.compute_major, d.compute_minor, ")")};
  }
  if (requested == "cuda") {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda requested but ", devices.status().message()));
  }
  std::string why = absl::StrCat(devices.status().message(), "; falling back to the CPU backend");
  // A machine without a GPU is the normal case for the CPU backend, not a
  // fault; a driver that is there but unusable is worth a warning. Callers
  // report the description once (device-info prints it, the engine's load
  // line names the backend).
  if (kernels::cuda::NvidiaDriverPresent()) {
    LOG(WARNING) << why;
  } else {
    VLOG(1) << why;
  }
  return BackendChoice{BackendKind::kCpu, why};
}

}  // namespace rill::kernels::backend
