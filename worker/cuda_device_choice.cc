#include "worker/cuda_device_choice.h"

#include "absl/strings/str_cat.h"

namespace rill::worker {

absl::StatusOr<int> ChooseCudaDevice(const CudaDeviceRequest& r) {
  int device = r.rank;
  std::string why = "the device numbered as its rank";
  if (r.worker_flag >= 0) {
    device = r.worker_flag;
    why = "rill-worker --cuda_device";
  } else if (!r.engine_devices.empty()) {
    if (r.rank >= static_cast<int>(r.engine_devices.size())) {
      return absl::InvalidArgumentError(absl::StrCat("the engine lists ",
                                                     r.engine_devices.size(),
                                                     " CUDA devices, none for this rank"));
    }
    device = r.engine_devices[r.rank];
    why = "the engine's device for this rank";
  } else if (r.visible_devices == 1) {
    device = 0;
    why = "the one device this process sees";
  }
  if (device < 0 || device >= r.visible_devices) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA device ", device, " (", why, ") is not visible: this process sees ",
        r.visible_devices, " device", r.visible_devices == 1 ? "" : "s",
        r.cuda_visible_devices.empty() ? ""
                                       : absl::StrCat(" (CUDA_VISIBLE_DEVICES=",
                                                      r.cuda_visible_devices, ")")));
  }
  return device;
}

}  // namespace rill::worker
