// JSON form of a benchmark's results: one object per load level, each with
// its summary (latencies in ms, throughput per second).
#ifndef RILL_BENCH_SERVE_BENCH_RESULTS_JSON_H_
#define RILL_BENCH_SERVE_BENCH_RESULTS_JSON_H_

#include <optional>
#include <string>
#include <vector>

#include "bench/serve_bench/goodput.h"
#include "bench/serve_bench/run_summary.h"

namespace rill::bench {

struct LevelResult {
  int concurrency = 0;
  double request_rate = 0;
  RunSummary summary;
  std::optional<GoodputSummary> goodput;  // With --goodput.
};

// `slo`: the --goodput spec the levels' goodput was computed for ("" none).
std::string ResultsToJson(const std::string& backend, const std::string& address,
                          const std::string& workload, const std::vector<LevelResult>& levels,
                          const std::string& slo = "");

// Human-readable table of the same results.
std::string ResultsToTable(const std::string& backend, const std::vector<LevelResult>& levels);

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_RESULTS_JSON_H_
