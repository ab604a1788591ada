#include "bench/serve_bench/run_summary.h"

#include <algorithm>
#include <cmath>

namespace rill::bench {

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

Distribution Summarize(const std::vector<double>& seconds) {
  Distribution d;
  d.count = static_cast<int64_t>(seconds.size());
  if (seconds.empty()) return d;
  double sum = 0, max = seconds.front();
  for (double s : seconds) {
    sum += s;
    max = std::max(max, s);
  }
  d.mean = 1e3 * sum / static_cast<double>(seconds.size());
  d.p50 = 1e3 * Percentile(seconds, 50);
  d.p90 = 1e3 * Percentile(seconds, 90);
  d.p99 = 1e3 * Percentile(seconds, 99);
  d.max = 1e3 * max;
  return d;
}

RunSummary SummarizeRun(const std::vector<RequestRecord>& records) {
  RunSummary s;
  std::vector<double> ttft, tpot, itl, e2e;
  double first_start = 0, last_end = 0;
  bool any = false;
  for (const RequestRecord& r : records) {
    if (!any || r.start_s < first_start) first_start = r.start_s;
    if (!any || r.end_s > last_end) last_end = r.end_s;
    any = true;
    if (!r.ok) {
      ++s.errors;
      if (s.first_errors.size() < 5 &&
          std::find(s.first_errors.begin(), s.first_errors.end(), r.error) == s.first_errors.end()) {
        s.first_errors.push_back(r.error);
      }
      continue;
    }
    ++s.completed;
    s.input_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    if (!r.chunk_times_s.empty()) ttft.push_back(r.ttft_s());
    if (r.output_tokens > 1) tpot.push_back(r.tpot_s());
    e2e.push_back(r.e2e_s());
    for (size_t i = 1; i < r.chunk_times_s.size(); ++i) {
      const int n = std::max(1, r.chunk_tokens[i]);
      const double gap = (r.chunk_times_s[i] - r.chunk_times_s[i - 1]) / n;
      for (int k = 0; k < n; ++k) itl.push_back(gap);
    }
  }
  s.duration_s = any ? last_end - first_start : 0;
  if (s.duration_s > 0) {
    s.request_throughput = static_cast<double>(s.completed) / s.duration_s;
    s.input_tokens_per_s = static_cast<double>(s.input_tokens) / s.duration_s;
    s.output_tokens_per_s = static_cast<double>(s.output_tokens) / s.duration_s;
  }
  s.ttft = Summarize(ttft);
  s.tpot = Summarize(tpot);
  s.itl = Summarize(itl);
  s.e2e = Summarize(e2e);
  return s;
}

}  // namespace rill::bench
