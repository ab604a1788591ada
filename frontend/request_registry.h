// Who owns each client request id of one frontend. Ids are unique among the
// running requests of the frontend (any of its Generate streams), and
// Inference/Abort and GetRequestStatus reach only requests started on the
// caller's own connection (gRPC peer), so knowing or guessing another
// client's id gets NOT_FOUND. Recently finished requests keep their final
// state for GetRequestStatus.
#ifndef RILL_FRONTEND_REQUEST_REGISTRY_H_
#define RILL_FRONTEND_REQUEST_REGISTRY_H_

#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "rill/v1/inference.pb.h"

namespace rill::frontend {

class GenerateSession;

// Thread-safe. Never calls out while holding its lock, so callers may hold
// their own locks (a session calls it under its mutex).
class RequestRegistry {
 public:
  struct Running {
    std::weak_ptr<GenerateSession> session;
    std::string peer;       // grpc::ServerContext::peer() of the Generate stream.
    std::string engine_id;  // The id the engine runs it under.
  };

  // Finished requests remembered for GetRequestStatus (oldest dropped first).
  static constexpr size_t kMaxFinished = 4096;

  // Claims `id`; false when it is already running on this frontend.
  bool Claim(const std::string& id, Running owner);
  // Frees a running id (the client is about to read its finished response,
  // or the stream is gone) and remembers its final state for its peer.
  // Ignored unless `engine_id` is the running one.
  void Release(const std::string& id, const std::string& engine_id,
               rill::v1::RequestState final_state);

  // The running request `id` when `peer` started it.
  std::optional<Running> FindRunning(const std::string& id, const std::string& peer) const;
  // The final state of `peer`'s most recently finished request `id`.
  std::optional<rill::v1::RequestState> FindFinished(const std::string& id,
                                                     const std::string& peer) const;

 private:
  static std::string FinishedKey(const std::string& peer, const std::string& id);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Running> running_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, rill::v1::RequestState> finished_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> finished_order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_REQUEST_REGISTRY_H_
