// rill-worker: one tensor-parallel rank. Started by the engine's
// multi-process executor (engine/multiproc_executor.h), which passes every
// flag; not meant to be run by hand.

#include <iostream>

#include <glog/logging.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "worker/worker_process.h"

ABSL_FLAG(int, rank, 0, "This worker's tensor-parallel rank.");
ABSL_FLAG(int, world_size, 1, "Number of tensor-parallel ranks.");
ABSL_FLAG(std::string, model, "", "Resolved model path (.gguf file or HF directory).");
ABSL_FLAG(std::string, control_socket, "", "The engine's Unix control socket.");
ABSL_FLAG(std::string, rendezvous_dir, "", "Shared directory for the gloo rendezvous.");
ABSL_FLAG(int, threads, 1, "CPU threads for this rank.");
ABSL_FLAG(int, num_blocks, 0, "KV cache blocks.");
ABSL_FLAG(int, block_size, 16, "Tokens per KV block.");
ABSL_FLAG(bool, exact_matmul, true, "f32 activations against quantized weights.");
ABSL_FLAG(int, comm_timeout_s, 60, "Rendezvous / collective timeout in seconds.");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  // Die with the engine even if it is killed without closing our socket.
  rill::worker::WorkerProcessOptions o;
  o.rank = absl::GetFlag(FLAGS_rank);
  o.world_size = absl::GetFlag(FLAGS_world_size);
  o.model_path = absl::GetFlag(FLAGS_model);
  o.control_socket = absl::GetFlag(FLAGS_control_socket);
  o.rendezvous_dir = absl::GetFlag(FLAGS_rendezvous_dir);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.num_blocks = absl::GetFlag(FLAGS_num_blocks);
  o.block_size = absl::GetFlag(FLAGS_block_size);
  o.exact_matmul = absl::GetFlag(FLAGS_exact_matmul);
  o.comm_timeout = std::chrono::seconds(absl::GetFlag(FLAGS_comm_timeout_s));
  if (o.model_path.empty() || o.control_socket.empty() || o.num_blocks <= 0) {
    std::cerr << "rill-worker: --model, --control_socket and --num_blocks are required "
                 "(it is started by rill-engine)\n";
    return 2;
  }
  absl::Status s = rill::worker::RunWorkerProcess(o);
  if (!s.ok()) {
    LOG(ERROR) << "rank " << o.rank << ": " << s;
    return 1;
  }
  return 0;
}
