// A request's stream of RequestOutputs from the engine loop to a caller:
// a thread-safe queue with a blocking Next, or a callback run on the engine
// loop thread (it must be quick and must not call back into the engine's
// blocking methods).
#ifndef RILL_ENGINE_OUTPUT_STREAM_H_
#define RILL_ENGINE_OUTPUT_STREAM_H_

#include <deque>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/request_output.h"

namespace rill::engine {

using OutputCallback = std::function<void(const RequestOutput&)>;

class RequestOutputStream {
 public:
  explicit RequestOutputStream(std::string request_id, OutputCallback callback = nullptr)
      : request_id_(std::move(request_id)), callback_(std::move(callback)) {}

  const std::string& request_id() const { return request_id_; }

  // The next output, waiting up to `timeout`. DeadlineExceeded on timeout;
  // OutOfRange once the finished output has been returned.
  absl::StatusOr<RequestOutput> Next(absl::Duration timeout = absl::InfiniteDuration());

  // True once the finished output was pushed (it may not be consumed yet).
  bool finished() const;

  // Engine side. Outputs after the finished one are dropped.
  void Push(RequestOutput output);

 private:
  const std::string request_id_;
  const OutputCallback callback_;
  mutable absl::Mutex mu_;
  std::deque<RequestOutput> queue_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_OUTPUT_STREAM_H_
