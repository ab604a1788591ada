#include "worker/comm/timed_communicator.h"

#include "absl/time/clock.h"

namespace rill::worker {

absl::Status TimedCommunicator::AllReduceSum(float* data, int64_t count) {
  const absl::Time start = absl::Now();
  absl::Status s = inner_->AllReduceSum(data, count);
  elapsed_ += absl::Now() - start;
  return s;
}

absl::Status TimedCommunicator::Broadcast(void* data, int64_t bytes, int root) {
  const absl::Time start = absl::Now();
  absl::Status s = inner_->Broadcast(data, bytes, root);
  elapsed_ += absl::Now() - start;
  return s;
}

absl::Duration TimedCommunicator::TakeElapsed() {
  const absl::Duration d = elapsed_;
  elapsed_ = absl::ZeroDuration();
  return d;
}

}  // namespace rill::worker
