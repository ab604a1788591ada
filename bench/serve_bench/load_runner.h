// Replays a workload against a backend: a fixed number of concurrent clients
// sending back to back, or Poisson arrivals at a request rate (optionally
// capped by a concurrency limit). Warm-up requests run first and are not
// recorded; a duration limit stops sending new requests.
#ifndef RILL_BENCH_SERVE_BENCH_LOAD_RUNNER_H_
#define RILL_BENCH_SERVE_BENCH_LOAD_RUNNER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/serve_bench/backend.h"
#include "bench/serve_bench/request_record.h"
#include "bench/serve_bench/workload.h"

namespace rill::bench {

struct LoadOptions {
  // Clients in flight at most; with request_rate == 0 they send back to back.
  int concurrency = 1;
  // > 0: Poisson arrivals at this many requests/s (exponential gaps, seeded).
  double request_rate = 0;
  int warmup_requests = 0;
  // Prompts for the warm-up; empty = the workload's own first requests.
  std::vector<BenchRequest> warmup_pool;
  double duration_s = 0;  // > 0: stop sending after this long.
  uint64_t seed = 0;
};

// Called after each recorded request finishes, from client threads.
using ProgressFn = std::function<void(const RequestRecord&)>;

// Arrival offsets (seconds from the start) for Poisson arrivals at `rate`.
std::vector<double> PoissonArrivals(int n, double rate, uint64_t seed);

// Records of the requests that were sent (all of them unless duration_s
// stopped the run early), in workload order.
absl::StatusOr<std::vector<RequestRecord>> RunLoad(Backend* backend,
                                                   const std::vector<BenchRequest>& requests,
                                                   const LoadOptions& options,
                                                   const ProgressFn& progress = nullptr);

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_LOAD_RUNNER_H_
