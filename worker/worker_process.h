// One tensor-parallel rank as a process (rill-worker): connects to the
// engine's control socket, receives its configuration (model, world size,
// cache size, backend, rendezvous directory or NCCL id), loads its shard of
// the model behind worker/rank_model.h (CPU over gloo, or CUDA over NCCL),
// then runs every command the engine sends until told to shut down or the
// engine goes away. Rank 0 returns the logits; the other ranks only report
// status (they hold identical copies).
#ifndef RILL_WORKER_WORKER_PROCESS_H_
#define RILL_WORKER_WORKER_PROCESS_H_

#include <chrono>
#include <string>

#include "absl/status/status.h"

namespace rill::worker {

struct WorkerProcessOptions {
  int rank = 0;
  std::string control_socket;  // engine's Unix socket path
  // How long to keep trying to reach the engine: short when the engine
  // spawned us, long for a worker container that may start before it.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(30)};
  // CUDA ranks: the device to use (rill-worker --cuda_device); -1: as the
  // engine says, else worker/cuda_device_choice.h's default.
  int cuda_device = -1;
};

// Returns when the engine shuts the worker down or closes the socket (OK),
// or on a fatal error (the process should exit non-zero).
absl::Status RunWorkerProcess(const WorkerProcessOptions& options);

}  // namespace rill::worker

#endif  // RILL_WORKER_WORKER_PROCESS_H_
