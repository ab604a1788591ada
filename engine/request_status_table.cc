#include "engine/request_status_table.h"

#include "absl/strings/str_cat.h"

namespace rill::engine {
namespace {

constexpr size_t kFinishedStatusesKept = 10000;

bool IsFinal(RequestStatus s) {
  return s == RequestStatus::kCompleted || s == RequestStatus::kCancelled ||
         s == RequestStatus::kFailed;
}

}  // namespace

const char* RequestStatusName(RequestStatus s) {
  switch (s) {
    case RequestStatus::kWaiting: return "WAITING";
    case RequestStatus::kRunning: return "RUNNING";
    case RequestStatus::kCompleted: return "COMPLETED";
    case RequestStatus::kCancelled: return "CANCELLED";
    case RequestStatus::kFailed: return "FAILED";
  }
  return "?";
}

RequestStatus StatusOf(RequestState s) {
  switch (s) {
    case RequestState::kWaiting:
    case RequestState::kPreempted: return RequestStatus::kWaiting;
    case RequestState::kRunning: return RequestStatus::kRunning;
    case RequestState::kFinishedStopped:
    case RequestState::kFinishedLength: return RequestStatus::kCompleted;
    case RequestState::kFinishedAborted: return RequestStatus::kCancelled;
    case RequestState::kFinishedError: return RequestStatus::kFailed;
  }
  return RequestStatus::kFailed;
}

absl::Status RequestStatusTable::Add(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = status_.find(id);
  if (it != status_.end() && !IsFinal(it->second)) {
    return absl::AlreadyExistsError(absl::StrCat("request id '", id, "' is already in use"));
  }
  status_[id] = RequestStatus::kWaiting;
  ++num_unfinished_;
  return absl::OkStatus();
}

void RequestStatusTable::Set(const std::string& id, RequestStatus status) {
  absl::MutexLock lock(&mu_);
  auto it = status_.find(id);
  if (it == status_.end() || IsFinal(it->second)) return;
  it->second = status;
  if (!IsFinal(status)) return;
  --num_unfinished_;
  finished_ids_.push_back(id);
  while (finished_ids_.size() > kFinishedStatusesKept) {
    auto old = status_.find(finished_ids_.front());
    if (old != status_.end() && IsFinal(old->second)) status_.erase(old);
    finished_ids_.pop_front();
  }
}

absl::StatusOr<RequestStatus> RequestStatusTable::Get(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = status_.find(id);
  if (it == status_.end()) return absl::NotFoundError(absl::StrCat("unknown request '", id, "'"));
  return it->second;
}

absl::Status RequestStatusTable::CheckUnfinished(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = status_.find(id);
  if (it == status_.end() || IsFinal(it->second)) {
    return absl::NotFoundError(absl::StrCat("no unfinished request '", id, "'"));
  }
  return absl::OkStatus();
}

int RequestStatusTable::num_unfinished() const {
  absl::MutexLock lock(&mu_);
  return num_unfinished_;
}

}  // namespace rill::engine
