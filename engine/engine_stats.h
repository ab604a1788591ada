// The engine's numbers (EngineStats, read from the metrics registry by
// AsyncEngine::GetStats) logged every --log_stats_interval and passed to
// extra loggers. Thread-safe.
#ifndef RILL_ENGINE_ENGINE_STATS_H_
#define RILL_ENGINE_ENGINE_STATS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace rill::engine {

struct EngineStats {
  int num_running = 0;
  int num_waiting = 0;
  double kv_usage = 0.0;
  double prefix_cache_hit_rate = 0.0;
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  int64_t steps = 0;
  int64_t preemptions = 0;
  // Tokens one step may hold (rill:step_token_budget): adapted online with
  // --target_itl_ms, else --max_num_batched_tokens.
  int64_t step_token_budget = 0;
  // Requests that ended, by how: stop or length / aborted / failed (error).
  int64_t requests_finished = 0;
  int64_t requests_aborted = 0;
  int64_t requests_failed = 0;
  // Seconds the steps spent in tensor-parallel collectives (0 without TP).
  double tp_collective_seconds = 0.0;
  int64_t engine_restarts = 0;  // Before this engine process (rill serve).
  // Since the previous EngineStatsReporter::WithRates call (Admin.GetStats).
  double prompt_tokens_per_second = 0.0;
  double generation_tokens_per_second = 0.0;
};

// Receives the stats on every DoLogStats call (from the calling thread).
using StatLogger = std::function<void(const EngineStats&)>;

class EngineStatsReporter {
 public:
  // `stats` with the token rates since the previous WithRates call.
  EngineStats WithRates(EngineStats stats);

  // Logs one line (running/waiting, KV usage, prefix hit rate, tokens/s since
  // the last call), passes `stats` to every logger and returns it.
  EngineStats Log(const EngineStats& stats);

  // AlreadyExists / NotFound on a duplicate / unknown name.
  absl::Status AddLogger(const std::string& name, StatLogger logger);
  absl::Status RemoveLogger(const std::string& name);

 private:
  mutable absl::Mutex mu_;
  EngineStats last_rated_ ABSL_GUARDED_BY(mu_);
  absl::Time last_rated_time_ ABSL_GUARDED_BY(mu_) = absl::Now();
  std::vector<std::pair<std::string, StatLogger>> loggers_ ABSL_GUARDED_BY(mu_);
  EngineStats last_logged_ ABSL_GUARDED_BY(mu_);
  absl::Time last_logged_time_ ABSL_GUARDED_BY(mu_) = absl::Now();
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_ENGINE_STATS_H_
