// grpc.health.v1.Health for Rill's servers, in place of gRPC's default
// service, which breaks the protocol's contract in two ways: Watch re-sends
// an unchanged status every time it is set (Rill's frontend sets it on each
// 500 ms engine probe), and a watched unknown service turns SERVING with the
// next overall update. Here Watch sends the current status, then a message
// only when that service's status changes; a service never registered with
// Set stays SERVICE_UNKNOWN (Check: NOT_FOUND). Thread-safe.
#ifndef RILL_BASE_HEALTH_SERVICE_H_
#define RILL_BASE_HEALTH_SERVICE_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "base/strict_service.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace rill::base {

class HealthService final
    : public grpc::health::v1::Health::WithRawCallbackMethod_Watch<
          StrictService<grpc::health::v1::Health>> {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  // The overall service ("") starts NOT_SERVING.
  HealthService();
  ~HealthService() override;

  // Sets a service's status ("" = the server as a whole), registering it.
  // Watchers hear of it only if it changed. Ignored after Shutdown().
  void Set(const std::string& service, bool serving);
  // Every status NOT_SERVING (sent to watchers), then their streams end
  // with OK; later Sets are ignored. Call before the server shuts down, so
  // open Watch calls do not hold its shutdown until the deadline.
  void Shutdown();

  grpc::Status Check(grpc::ServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req,
                     grpc::health::v1::HealthCheckResponse* resp) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Watch(grpc::CallbackServerContext* ctx,
                                                    const grpc::ByteBuffer* request) override;

 private:
  class Watcher;

  ServingStatus StatusLocked(const std::string& service) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Remove(Watcher* w);

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, ServingStatus> status_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar no_watchers_;
};

}  // namespace rill::base

#endif  // RILL_BASE_HEALTH_SERVICE_H_
