// Which CUDA device a tensor-parallel rank runs on. Spawned by the engine on
// one machine, rank r gets the engine's list entry r (by default device r);
// as a container with one GPU (Kubernetes gives each worker container its
// own, seen as device 0), the worker decides from what it sees.
#ifndef RILL_WORKER_CUDA_DEVICE_CHOICE_H_
#define RILL_WORKER_CUDA_DEVICE_CHOICE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::worker {

struct CudaDeviceRequest {
  int rank = 0;
  // The engine's choice, index = rank (WorkerConfig.cuda_devices); empty:
  // the worker chooses.
  std::vector<int> engine_devices;
  // rill-worker --cuda_device; -1: not given. It wins over the engine's list
  // (the container knows its GPUs better than the engine).
  int worker_flag = -1;
  int visible_devices = 0;  // devices this process sees (cudaGetDeviceCount)
  // $CUDA_VISIBLE_DEVICES as read, for the error message only.
  std::string cuda_visible_devices;
};

// The worker's flag, else the engine's entry for the rank, else device 0
// when the process sees exactly one, else the device numbered as the rank.
// FailedPrecondition when the chosen device is not visible (the caller
// names the rank);
// InvalidArgument when the engine's list has no entry for the rank.
absl::StatusOr<int> ChooseCudaDevice(const CudaDeviceRequest& request);

}  // namespace rill::worker

#endif  // RILL_WORKER_CUDA_DEVICE_CHOICE_H_
