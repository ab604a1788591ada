#include "cli/device_info_command.h"

#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "cli/common_flags.h"
#include "kernels/backend/backend.h"
#include "kernels/cuda/device_probe.h"

namespace rill::cli {

int RunDeviceInfo(int, char**) {
  std::cout << "built with CUDA: " << (kernels::cuda::BuiltWithCuda() ? "yes" : "no") << "\n";
  if (kernels::cuda::BuiltWithCuda())
    std::cout << "linked: " << kernels::cuda::LinkedLibraryVersions() << "\n";
  absl::StatusOr<std::vector<kernels::cuda::CudaDeviceInfo>> devices =
      kernels::cuda::ProbeCudaDevices();
  if (devices.ok()) {
    for (const kernels::cuda::CudaDeviceInfo& d : *devices) {
      std::cout << "device " << d.index << ": " << d.name << " sm_" << d.compute_major
                << d.compute_minor << " " << (d.total_memory_bytes >> 20) << " MiB\n";
    }
  }
  absl::StatusOr<kernels::backend::BackendChoice> choice =
      kernels::backend::ChooseBackend(absl::GetFlag(FLAGS_backend));
  if (!choice.ok()) {
    std::cerr << "error: " << choice.status().message() << "\n";
    return 1;
  }
  std::cout << "backend: " << kernels::backend::BackendName(choice->kind) << " ("
            << choice->description << ")\n";
  return 0;
}

}  // namespace rill::cli
