// Records one event per engine step between StartProfile and StopProfile and
// writes them as a Chrome trace (chrome://tracing, Perfetto): what a step
// cost, how many sequences and tokens it carried. Thread-safe: the engine
// loop records, any thread starts and stops.
#ifndef RILL_ENGINE_STEP_PROFILER_H_
#define RILL_ENGINE_STEP_PROFILER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rill::engine {

class StepProfiler {
 public:
  // FailedPrecondition if a profile is already running; InvalidArgument if
  // `dir` is empty.
  absl::Status Start(const std::string& dir);
  // Writes the trace into the directory given to Start and returns its path.
  // FailedPrecondition if no profile is running.
  absl::StatusOr<std::string> Stop();

  bool active() const;
  // No-op unless active.
  void RecordStep(absl::Time start, absl::Duration duration, int num_seqs, int64_t num_tokens);

 private:
  struct Step {
    absl::Time start;
    absl::Duration duration;
    int num_seqs;
    int64_t num_tokens;
  };
  mutable absl::Mutex mu_;
  bool active_ ABSL_GUARDED_BY(mu_) = false;
  std::string dir_ ABSL_GUARDED_BY(mu_);
  absl::Time started_ ABSL_GUARDED_BY(mu_);
  std::vector<Step> steps_ ABSL_GUARDED_BY(mu_);
  int traces_written_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_STEP_PROFILER_H_
