// `rill serve --engines=N --openai_port`: rill-engine processes 1..N-1 beside
// the launcher's engine 0, each with its own KV cache and threads, for the
// gateway's data-parallel routing (the native frontends use engine 0). Each
// takes engine 0's flags and credential file. A replica that exits is
// restarted on the same port after a backoff (the gateway routes around it
// meanwhile); one that exits with code 2 (it cannot start with this
// configuration) is left out. Thread: one owner thread.
#ifndef RILL_CLI_ENGINE_REPLICAS_H_
#define RILL_CLI_ENGINE_REPLICAS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/child_process.h"

namespace rill::cli {

struct EngineReplicaOptions {
  std::string engine_binary;
  std::vector<std::string> engine_flags;  // As engine 0's (model, threads, ...).
  std::string secret_file;                // Engine 0's credential file.
  std::string run_dir;                    // engine-<i>.port (and .log with log_to_files).
  bool log_to_files = false;
  int count = 0;                          // Replicas beyond engine 0.
  // A replica that died waits first_backoff before its restart, doubled for
  // each restart within the last 10 minutes, at most max_backoff.
  absl::Duration first_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(60);
};

class EngineReplicas {
 public:
  ~EngineReplicas() { Stop(); }
  // Starts the replicas and waits until each has loaded the model (health
  // SERVING).
  absl::Status Start(const EngineReplicaOptions& options);
  // "127.0.0.1:port" of each replica (a restart keeps it).
  const std::vector<std::string>& addresses() const { return addresses_; }
  // Reaps replicas that exited and restarts those whose backoff is over.
  // The gateway needs no news of it: it keeps the replica's address, routes
  // around it while it is down and back to it once it answers again. Never
  // blocks longer than one health check (2 s).
  void Supervise();
  void Stop();

 private:
  enum class State { kServing, kWaitingToRestart, kLoading, kGivenUp };
  struct Replica {
    int index = 0;  // 1..count.
    std::vector<std::string> argv;
    std::string port_file;
    std::string log;  // Empty: inherit stderr.
    std::unique_ptr<base::ChildProcess> process;
    State state = State::kServing;
    absl::Time restart_at;
    std::vector<absl::Time> restarts;  // Within the last 10 minutes.
    int total_restarts = 0;            // rill:engine_restarts_total of the next one.
  };

  // Starts (or restarts, appending to its log) one replica's process.
  absl::Status Launch(Replica* r, bool restart);
  // Schedules the restart of a replica that exited with `code`.
  void OnExit(Replica* r, int code);

  EngineReplicaOptions options_;
  std::vector<Replica> replicas_;
  std::vector<std::string> addresses_;
};

}  // namespace rill::cli

#endif  // RILL_CLI_ENGINE_REPLICAS_H_
