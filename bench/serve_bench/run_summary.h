// Aggregates the records of one benchmark run (one backend, one load level)
// into the figures the report prints: latency distributions and throughput.
#ifndef RILL_BENCH_SERVE_BENCH_RUN_SUMMARY_H_
#define RILL_BENCH_SERVE_BENCH_RUN_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/serve_bench/request_record.h"

namespace rill::bench {

struct Distribution {
  int64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;  // Milliseconds.
};

// Linear-interpolated percentile (q in [0, 100]) of unsorted values; 0 if empty.
double Percentile(std::vector<double> values, double q);
// Distribution of values given in seconds, reported in milliseconds.
Distribution Summarize(const std::vector<double>& seconds);

struct RunSummary {
  int64_t completed = 0;
  int64_t errors = 0;
  std::vector<std::string> first_errors;  // Up to 5 distinct messages.
  double duration_s = 0;  // First send to last completion.
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double request_throughput = 0;  // Completed requests / s.
  double input_tokens_per_s = 0;
  double output_tokens_per_s = 0;
  Distribution ttft, tpot, itl, e2e;
};

// Only successful requests count towards latencies and token throughput.
// Inter-token latency: the gap between consecutive chunks, divided evenly over
// the tokens of the later chunk (so a server that batches tokens per chunk is
// not rewarded with fewer, larger gaps).
RunSummary SummarizeRun(const std::vector<RequestRecord>& records);

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_RUN_SUMMARY_H_
