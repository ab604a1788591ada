#include "engine/output_stream.h"

namespace rill::engine {

absl::StatusOr<RequestOutput> RequestOutputStream::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || finished_; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) {
    return absl::DeadlineExceededError("no output yet for request " + request_id_);
  }
  if (queue_.empty()) return absl::OutOfRangeError("request " + request_id_ + " has finished");
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  return out;
}

bool RequestOutputStream::finished() const {
  absl::MutexLock lock(&mu_);
  return finished_;
}

void RequestOutputStream::Push(RequestOutput output) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = output.finished;
    if (!callback_) {
      queue_.push_back(std::move(output));
      return;
    }
  }
  callback_(output);
}

}  // namespace rill::engine
