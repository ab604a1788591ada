// A Communicator that adds up the wall time its collectives take, so a
// worker can report how long each step spent in all-reduce (the engine's
// rill:tp_collective_seconds). The time includes waiting for the slower
// ranks to arrive, which is what the step loses to the collective.
// Not thread-safe, like the communicator it wraps: one step thread per rank.
#ifndef RILL_WORKER_COMM_TIMED_COMMUNICATOR_H_
#define RILL_WORKER_COMM_TIMED_COMMUNICATOR_H_

#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "worker/comm/communicator.h"

namespace rill::worker {

class TimedCommunicator : public Communicator {
 public:
  explicit TimedCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  const char* backend() const override { return inner_->backend(); }
  absl::Status AllReduceSum(float* data, int64_t count) override;
  absl::Status Broadcast(void* data, int64_t bytes, int root) override;

  // Time spent in collectives since the previous call (or creation).
  absl::Duration TakeElapsed();

 private:
  std::unique_ptr<Communicator> inner_;
  absl::Duration elapsed_;
};

}  // namespace rill::worker

#endif  // RILL_WORKER_COMM_TIMED_COMMUNICATOR_H_
