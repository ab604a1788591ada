// What one benchmarked request did, as seen by the client: when it was sent,
// when each chunk of new tokens arrived, how many tokens went in and out.
#ifndef RILL_BENCH_SERVE_BENCH_REQUEST_RECORD_H_
#define RILL_BENCH_SERVE_BENCH_REQUEST_RECORD_H_

#include <cstdint>
#include <string>
#include <vector>

namespace rill::bench {

struct RequestRecord {
  double start_s = 0;  // Seconds since the run started (steady clock).
  // Arrival time of every streamed chunk that carried new output tokens, and
  // how many tokens it carried (servers may batch several tokens per chunk).
  std::vector<double> chunk_times_s;
  std::vector<int> chunk_tokens;
  double end_s = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  bool ok = false;
  std::string error;  // Why it failed, when !ok.

  double ttft_s() const { return chunk_times_s.empty() ? 0 : chunk_times_s.front() - start_s; }
  double e2e_s() const { return end_s - start_s; }
  // Time per output token after the first (vLLM's definition); 0 when < 2 tokens.
  double tpot_s() const {
    return output_tokens > 1 ? (e2e_s() - ttft_s()) / static_cast<double>(output_tokens - 1) : 0;
  }
};

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_REQUEST_RECORD_H_
