#include "base/health_service.h"

#include <glog/logging.h>

#include "absl/time/time.h"
#include "base/strict_parse.h"

namespace rill::base {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Watch call. Writes go out one at a time; a status that changes while
// a write is in flight is sent when it completes, unless it is the one sent
// last. Lock order: HealthService::mu_, then mu_.
class HealthService::Watcher : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  Watcher(HealthService* owner, std::string service) : owner_(owner), service_(std::move(service)) {}

  const std::string& service() const { return service_; }

  void Send(ServingStatus status) {
    absl::MutexLock l(&mu_);
    want_ = status;
    MaybeWriteLocked();
  }
  // Ends the call once what is wanted has been written.
  void End() {
    absl::MutexLock l(&mu_);
    ending_ = true;
    MaybeWriteLocked();
  }
  // A call refused before it was watching (bad request).
  void Refuse(const grpc::Status& status) {
    absl::MutexLock l(&mu_);
    FinishLocked(status);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock l(&mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the watch stream broke"));
      return;
    }
    MaybeWriteLocked();
  }
  void OnCancel() override {
    absl::MutexLock l(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }
  void OnDone() override {
    owner_->Remove(this);
    delete this;
  }

 private:
  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || writing_) return;
    if (want_ != sent_) {
      HealthCheckResponse resp;
      resp.set_status(want_);
      const std::string bytes = resp.SerializeAsString();
      grpc::Slice slice(bytes);
      buffer_ = grpc::ByteBuffer(&slice, 1);
      sent_ = want_;
      writing_ = true;
      StartWrite(&buffer_);
      return;
    }
    if (ending_) FinishLocked(grpc::Status::OK);
  }
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  HealthService* const owner_;
  const std::string service_;
  absl::Mutex mu_;
  grpc::ByteBuffer buffer_ ABSL_GUARDED_BY(mu_);
  // UNKNOWN (0) is never a status a service has, so the first Send writes.
  ServingStatus sent_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  ServingStatus want_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

HealthService::HealthService() {
  status_[""] = HealthCheckResponse::NOT_SERVING;
  ParseStrictly(this, "Check", &HealthService::Check);
}

HealthService::~HealthService() {
  Shutdown();
  absl::MutexLock l(&mu_);
  // The server (shut down before this) has ended every call; this only
  // waits for their last callbacks.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!watchers_.empty()) {
    if (no_watchers_.WaitWithDeadline(&mu_, deadline)) {
      LOG(ERROR) << watchers_.size() << " health Watch calls outlive the health service";
      break;
    }
  }
}

void HealthService::Set(const std::string& service, bool serving) {
  const ServingStatus status = serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  absl::MutexLock l(&mu_);
  if (shut_down_) return;
  auto [it, added] = status_.try_emplace(service, status);
  if (!added && it->second == status) return;
  it->second = status;
  for (Watcher* w : watchers_) {
    if (w->service() == service) w->Send(status);
  }
}

void HealthService::Shutdown() {
  absl::MutexLock l(&mu_);
  if (shut_down_) return;
  shut_down_ = true;
  for (auto& [service, status] : status_) status = HealthCheckResponse::NOT_SERVING;
  for (Watcher* w : watchers_) {
    if (status_.contains(w->service())) w->Send(HealthCheckResponse::NOT_SERVING);
    w->End();
  }
}

HealthService::ServingStatus HealthService::StatusLocked(const std::string& service) const {
  auto it = status_.find(service);
  return it == status_.end() ? HealthCheckResponse::SERVICE_UNKNOWN : it->second;
}

grpc::Status HealthService::Check(grpc::ServerContext*, const HealthCheckRequest* req,
                                  HealthCheckResponse* resp) {
  absl::MutexLock l(&mu_);
  const ServingStatus status = StatusLocked(req->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
  }
  resp->set_status(status);
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* HealthService::Watch(grpc::CallbackServerContext*,
                                                                 const grpc::ByteBuffer* request) {
  HealthCheckRequest req;
  const absl::Status parsed = ParseStrict(*request, &req);
  auto* w = new Watcher(this, req.service());
  absl::MutexLock l(&mu_);
  watchers_.insert(w);
  if (!parsed.ok()) {
    w->Refuse(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(parsed.message())));
  } else {
    w->Send(StatusLocked(req.service()));
    if (shut_down_) w->End();
  }
  return w;
}

void HealthService::Remove(Watcher* w) {
  absl::MutexLock l(&mu_);
  watchers_.erase(w);
  if (watchers_.empty()) no_watchers_.SignalAll();
}

}  // namespace rill::base
