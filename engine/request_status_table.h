// The status of every request an AsyncEngine accepted (unfinished ones, and
// the last 10,000 finished). How many ended which way is counted once, in
// EngineMetrics (vllm:request_success_total).
// Thread-safe: callers' threads check ids and read statuses while the engine
// loop moves requests along.
#ifndef RILL_ENGINE_REQUEST_STATUS_TABLE_H_
#define RILL_ENGINE_REQUEST_STATUS_TABLE_H_

#include <cstdint>
#include <deque>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/request.h"

namespace rill::engine {

enum class RequestStatus { kWaiting, kRunning, kCompleted, kCancelled, kFailed };
const char* RequestStatusName(RequestStatus status);
// WAITING / RUNNING / COMPLETED (stop, length) / CANCELLED (abort) / FAILED (error).
RequestStatus StatusOf(RequestState state);

class RequestStatusTable {
 public:
  // Registers a new request as WAITING; AlreadyExists if the id is unfinished.
  absl::Status Add(const std::string& request_id);
  // Moves an unfinished request to `status`; no-op for unknown or finished ids.
  void Set(const std::string& request_id, RequestStatus status);
  absl::StatusOr<RequestStatus> Get(const std::string& request_id) const;
  // NotFound unless the request is unfinished.
  absl::Status CheckUnfinished(const std::string& request_id) const;
  int num_unfinished() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, RequestStatus> status_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> finished_ids_ ABSL_GUARDED_BY(mu_);  // Oldest first, capped.
  int num_unfinished_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_REQUEST_STATUS_TABLE_H_
