// Collective operations among the tensor-parallel ranks of one model. The
// model code only sees this interface: gloo over TCP on CPU
// (gloo_communicator.h), NCCL on GPU (the CUDA backend), and a trivial one for
// a single rank. Calls are collective: every rank makes the same calls in the
// same order with the same sizes. Not thread-safe: one step thread per rank.
#ifndef RILL_WORKER_COMM_COMMUNICATOR_H_
#define RILL_WORKER_COMM_COMMUNICATOR_H_

#include <cstdint>

#include "absl/status/status.h"

namespace rill::worker {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // "gloo", "nccl", "none".
  virtual const char* backend() const = 0;

  // data[i] = sum over ranks of data[i], in place. Every rank ends with
  // bitwise the same values. Unavailable when a peer is gone or the
  // operation timed out.
  virtual absl::Status AllReduceSum(float* data, int64_t count) = 0;

  // Copies `bytes` bytes from rank `root`'s buffer into every other rank's.
  virtual absl::Status Broadcast(void* data, int64_t bytes, int root) = 0;
};

// World of one: every collective is the identity.
class SingleRankCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  const char* backend() const override { return "none"; }
  absl::Status AllReduceSum(float*, int64_t) override { return absl::OkStatus(); }
  absl::Status Broadcast(void*, int64_t, int) override { return absl::OkStatus(); }
};

}  // namespace rill::worker

#endif  // RILL_WORKER_COMM_COMMUNICATOR_H_
