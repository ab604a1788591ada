// Which compute backend a process uses, chosen once at start-up. Model code
// asks for the backend by this value; it never tests #ifdefs.
#ifndef RILL_KERNELS_BACKEND_BACKEND_H_
#define RILL_KERNELS_BACKEND_BACKEND_H_

#include <string>

#include "absl/status/statusor.h"

namespace rill::kernels::backend {

enum class BackendKind { kCpu, kCuda };

struct BackendChoice {
  BackendKind kind = BackendKind::kCpu;
  // Human-readable: the device used, or why the CPU was chosen instead.
  std::string description;
};

// `requested` is "auto" (CUDA when a device is usable, else CPU: a warning
// is logged only when an NVIDIA driver is there but unusable), "cpu", or
// "cuda" (an error when no device is usable).
absl::StatusOr<BackendChoice> ChooseBackend(const std::string& requested);

const char* BackendName(BackendKind kind);

}  // namespace rill::kernels::backend

#endif  // RILL_KERNELS_BACKEND_BACKEND_H_
