// rill-worker: one tensor-parallel rank. Either started by the engine's
// multi-process executor (engine/multiproc_executor.h), or run on its own as
// a container next to the engine (rill-engine --external_workers_dir): it
// connects to the engine's control socket, which sends its configuration.

#include <iostream>

#include <glog/logging.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "base/flags_usage.h"
#include "worker/worker_process.h"

ABSL_FLAG(int, rank, 0, "This worker's tensor-parallel rank.");
ABSL_FLAG(std::string, control_socket, "", "The engine's Unix control socket.");
ABSL_FLAG(int, connect_timeout_s, 30,
          "How long to wait for the engine's socket (longer for a worker container).");
ABSL_FLAG(int, cuda_device, -1,
          "backend cuda: this rank's CUDA device; -1 = the engine's --cuda_devices entry, else "
          "device 0 when this process sees one GPU (a container with one), else the rank.");

int main(int argc, char** argv) {
  rill::base::HandleHelpFlag(
      argc, argv,
      {"rill-worker --control_socket=PATH [--rank=N]: one tensor-parallel rank of a rill-engine.",
       {"worker/worker_main.cc"}});
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  rill::worker::WorkerProcessOptions o;
  o.rank = absl::GetFlag(FLAGS_rank);
  o.control_socket = absl::GetFlag(FLAGS_control_socket);
  o.connect_timeout = std::chrono::seconds(absl::GetFlag(FLAGS_connect_timeout_s));
  o.cuda_device = absl::GetFlag(FLAGS_cuda_device);
  if (o.control_socket.empty() || o.rank < 0) {
    std::cerr << "rill-worker: --control_socket and --rank are required; the engine sends the "
                 "rest (model, world size, cache) when the worker connects\n";
    return 2;
  }
  absl::Status s = rill::worker::RunWorkerProcess(o);
  if (!s.ok()) {
    LOG(ERROR) << "rank " << o.rank << ": " << s;
    return 1;
  }
  return 0;
}
