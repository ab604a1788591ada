// The requests a benchmark replays: from a JSONL dataset of prompts, or
// synthetic token-id prompts with length distributions and an optional
// shared prefix (the prefix-caching case). Deterministic for a seed.
#ifndef RILL_BENCH_SERVE_BENCH_WORKLOAD_H_
#define RILL_BENCH_SERVE_BENCH_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::bench {

// Exactly one of text / token_ids is set.
struct BenchRequest {
  std::string text;
  std::vector<int32_t> token_ids;
  int max_tokens = 0;  // Generated exactly (the client asks to ignore EOS).
};

struct SyntheticOptions {
  int num_requests = 100;
  int input_len = 128;
  // Lengths are uniform in [len * (1 - range), len * (1 + range)].
  double input_len_range = 0;
  int output_len = 128;
  double output_len_range = 0;
  // The first shared_prefix_len tokens are the same in every prompt (counted
  // inside input_len).
  int shared_prefix_len = 0;
  // Token ids are drawn uniformly from [id_lo, id_hi): ordinary vocabulary,
  // clear of the special tokens at the start of most vocabularies.
  int32_t id_lo = 1000;
  int32_t id_hi = 40000;
  uint64_t seed = 0;
};

absl::StatusOr<std::vector<BenchRequest>> SyntheticWorkload(const SyntheticOptions& options);

// The mixed workload: short chat requests with a fraction of long-document
// prompts among them (the case where one long prefill stalls every decode).
struct LongPromptOptions {
  double fraction = 0;  // Of the requests, in [0, 1]; round(fraction * n) of them.
  int input_len = 4000;
  int output_len = 64;
  int32_t id_lo = 1000;  // As SyntheticOptions.
  int32_t id_hi = 40000;
  uint64_t seed = 0;
};

// Replaces a seeded random choice of the requests with long synthetic
// token-id prompts (each its own, so they share no cached prefix).
absl::Status MixInLongPrompts(const LongPromptOptions& options, std::vector<BenchRequest>* requests);

// JSONL, one object per line: {"prompt": "..."} or {"prompt_token_ids": [..]},
// optionally "output_len": N (else default_output_len). Blank lines are
// skipped; any other malformed line is an error naming the file and line.
// Cycles through the file when num_requests exceeds its lines.
absl::StatusOr<std::vector<BenchRequest>> LoadDataset(const std::string& path, int num_requests,
                                                      int default_output_len);

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_WORKLOAD_H_
