// Goodput as DistServe and vLLM's benchmark_serving define it: completed
// requests per second that met every service-level objective given. The
// SLOs are per request, in milliseconds:
//   ttft_ms  time to first token
//   tpot_ms  mean time per output token after the first (vLLM's TPOT)
//   itl_ms   the request's p90 inter-token gap (a request whose stream
//            stalls once for seconds misses it even when its mean is fine)
//   e2e_ms   end-to-end latency
// written "ttft_ms:2000,itl_ms:150" (commas or spaces between them).
#ifndef RILL_BENCH_SERVE_BENCH_GOODPUT_H_
#define RILL_BENCH_SERVE_BENCH_GOODPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/serve_bench/request_record.h"

namespace rill::bench {

struct SloSpec {
  std::optional<double> ttft_ms, tpot_ms, itl_ms, e2e_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !itl_ms && !e2e_ms; }
  // The spec as parsed, e.g. "ttft_ms:2000 itl_ms:150".
  std::string ToString() const;
};

// InvalidArgument naming the bad part: an unknown key, a value that is not a
// positive number, a key given twice, or nothing at all.
absl::StatusOr<SloSpec> ParseSloSpec(absl::string_view spec);

// The request's p90 inter-token gap in seconds, each chunk's gap spread over
// its tokens (as RunSummary's ITL); 0 with fewer than two chunks.
double RequestItlP90Seconds(const RequestRecord& r);

// Whether a successful request met every SLO in `slo` (a failed one never does).
bool MeetsSlo(const RequestRecord& r, const SloSpec& slo);

struct GoodputSummary {
  int64_t met = 0;          // Requests that met every SLO.
  double goodput = 0;       // met / duration_s (requests per second).
  double attainment = 0;    // met / requests sent (0..1).
};

// `duration_s`: the run's duration (RunSummary::duration_s).
GoodputSummary ComputeGoodput(const std::vector<RequestRecord>& records, const SloSpec& slo,
                              double duration_s);

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_GOODPUT_H_
