// `rill serve --engines=N --openai_port`: rill-engine processes 1..N-1 beside
// the launcher's engine 0, each with its own KV cache and threads, for the
// gateway's data-parallel routing (the native frontends use engine 0). Each
// takes engine 0's flags and credential file. A replica that exits is
// reported once and left out: the gateway routes around it, the others keep
// serving (no restart yet). Thread: one owner thread.
#ifndef RILL_CLI_ENGINE_REPLICAS_H_
#define RILL_CLI_ENGINE_REPLICAS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/child_process.h"

namespace rill::cli {

struct EngineReplicaOptions {
  std::string engine_binary;
  std::vector<std::string> engine_flags;  // As engine 0's (model, threads, ...).
  std::string secret_file;                // Engine 0's credential file.
  std::string run_dir;                    // engine-<i>.port (and .log with log_to_files).
  bool log_to_files = false;
  int count = 0;                          // Replicas beyond engine 0.
};

class EngineReplicas {
 public:
  ~EngineReplicas() { Stop(); }
  // Starts the replicas and waits until each has loaded the model (health
  // SERVING).
  absl::Status Start(const EngineReplicaOptions& options);
  // "127.0.0.1:port" of each replica.
  const std::vector<std::string>& addresses() const { return addresses_; }
  // Reaps replicas that exited and says so once each.
  void Check();
  void Stop();

 private:
  std::vector<std::unique_ptr<base::ChildProcess>> processes_;
  std::vector<std::string> addresses_;
};

}  // namespace rill::cli

#endif  // RILL_CLI_ENGINE_REPLICAS_H_
