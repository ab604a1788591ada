// Collectives among the tensor-parallel ranks of a model on GPUs: the
// device-side sibling of communicator.h. Buffers are device pointers and the
// work is queued on the caller's stream (capturable into a CUDA graph), so
// the CUDA model all-reduces without leaving the device. Calls are
// collective, as in communicator.h; one step thread per rank.
#ifndef RILL_WORKER_COMM_DEVICE_COMMUNICATOR_H_
#define RILL_WORKER_COMM_DEVICE_COMMUNICATOR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/cuda_runtime_api.h"

namespace rill::worker {

class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // "nccl".
  virtual const char* backend() const = 0;

  // Queues data[i] = sum over ranks of data[i] for `count` bfloat16 values at
  // device address `data` on `stream`. Every rank ends with the same bits.
  // Internal when the collective could not be queued.
  virtual absl::Status AllReduceSumBf16(void* data, int64_t count,
                                        ::rill::kernels::cuda::Stream stream) = 0;
};

}  // namespace rill::worker

#endif  // RILL_WORKER_COMM_DEVICE_COMMUNICATOR_H_
