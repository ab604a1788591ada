// One tensor-parallel rank as a process (rill-worker): connects back to the
// engine's control socket, joins the gloo group of its peers, binds its shard
// of the model and its KV cache, then runs every command the engine sends
// until told to shut down or the engine goes away. Rank 0 returns the logits;
// the other ranks only report status (they hold identical copies).
#ifndef RILL_WORKER_WORKER_PROCESS_H_
#define RILL_WORKER_WORKER_PROCESS_H_

#include <chrono>
#include <string>

#include "absl/status/status.h"

namespace rill::worker {

struct WorkerProcessOptions {
  int rank = 0;
  int world_size = 1;
  std::string model_path;      // resolved .gguf file or HF directory
  std::string control_socket;  // engine's Unix socket path
  std::string rendezvous_dir;  // gloo FileStore directory (world_size > 1)
  int threads = 1;
  int num_blocks = 0;
  int block_size = 16;
  bool exact_matmul = true;
  std::chrono::milliseconds comm_timeout{std::chrono::seconds(60)};
};

// Returns when the engine shuts the worker down or closes the socket (OK),
// or on a fatal error (the process should exit non-zero).
absl::Status RunWorkerProcess(const WorkerProcessOptions& options);

}  // namespace rill::worker

#endif  // RILL_WORKER_WORKER_PROCESS_H_
