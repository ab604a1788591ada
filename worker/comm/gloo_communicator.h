// Communicator over gloo (Debian's libgloo): TCP pairs between the ranks,
// rendezvous through a shared directory (gloo's FileStore), so processes on
// one machine need nothing but a path they all know. Used for tensor
// parallelism on CPU.
#ifndef RILL_WORKER_COMM_GLOO_COMMUNICATOR_H_
#define RILL_WORKER_COMM_GLOO_COMMUNICATOR_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/comm/communicator.h"

namespace gloo {
class Context;
}

namespace rill::worker {

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  // Directory every rank can read and write; fresh (or with a fresh prefix)
  // for each group, since gloo's FileStore keys are never deleted.
  std::string rendezvous_dir;
  std::string prefix = "rill";
  // Interface address the ranks listen on: loopback, so the collective
  // ports are never reachable from outside the machine.
  std::string hostname = "127.0.0.1";
  // Bounds the rendezvous and every collective: a dead peer becomes an
  // error instead of a hang.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

class GlooCommunicator : public Communicator {
 public:
  // Blocks until all world_size ranks have connected (or the timeout).
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Create(const GlooOptions& options);
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  const char* backend() const override { return "gloo"; }
  absl::Status AllReduceSum(float* data, int64_t count) override;
  absl::Status Broadcast(void* data, int64_t bytes, int root) override;

 private:
  GlooCommunicator(std::shared_ptr<gloo::Context> context, int rank, int world_size);

  std::shared_ptr<gloo::Context> context_;
  int rank_;
  int world_size_;
  uint32_t next_tag_ = 0;  // Collectives are sequential; tags keep them apart.
};

}  // namespace rill::worker

#endif  // RILL_WORKER_COMM_GLOO_COMMUNICATOR_H_
