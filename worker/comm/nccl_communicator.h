// DeviceCommunicator over NCCL. The engine makes one unique id per model
// (NewNcclUniqueId, needs no GPU) and sends it to every rank in its
// WorkerConfig; each rank joins with CreateNcclCommunicator on its own GPU.
#ifndef RILL_WORKER_COMM_NCCL_COMMUNICATOR_H_
#define RILL_WORKER_COMM_NCCL_COMMUNICATOR_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/comm/device_communicator.h"

namespace rill::worker {

// A fresh NCCL unique id (kernels::cuda::kNcclUniqueIdBytes opaque bytes).
// FailedPrecondition in a build without NCCL; Internal when NCCL fails.
absl::StatusOr<std::string> NewNcclUniqueId();

// NCCL's version as "2.28.9", or "none" in a build without NCCL.
std::string NcclVersionString();

struct NcclOptions {
  std::string unique_id;  // from NewNcclUniqueId, the same on every rank
  int rank = 0;
  int world_size = 1;
  int device = 0;  // CUDA device index of this rank
  // How long to wait for every rank to join.
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

// Joins the communicator as options.rank on options.device (which becomes
// the calling thread's device). InvalidArgument for a malformed id, rank or
// device; FailedPrecondition in a build without NCCL or when the device
// cannot be used; DeadlineExceeded when not every rank joined in time;
// Internal for other NCCL failures.
absl::StatusOr<std::unique_ptr<DeviceCommunicator>> CreateNcclCommunicator(
    const NcclOptions& options);

}  // namespace rill::worker

#endif  // RILL_WORKER_COMM_NCCL_COMMUNICATOR_H_
