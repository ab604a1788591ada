// The roofline rows bench-model prints after its table: the machine's f32 FMA
// and int16 VNNI peaks and read bandwidth, measured in the same run, and what
// they allow for the measured decode rates. A ratio target such as "batch 32
// >= 5x batch 1" is only reachable when the batch-32 ceiling at the FMA peak
// is far enough above the measured batch-1 rate; these rows show by how much.
#ifndef RILL_CLI_ROOFLINE_REPORT_H_
#define RILL_CLI_ROOFLINE_REPORT_H_

#include <ostream>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "worker/loader/checkpoint.h"

namespace rill::cli {

struct DecodeRate {
  int batch = 1;
  double tokens_per_s = 0;
};

// `gen_tokens`: decode steps each sequence ran (contexts 1..gen_tokens, so
// the mean context is about gen_tokens / 2). `pp_tokens_per_s`: prefill rate
// of a `prompt_tokens` prompt.
void PrintRoofline(const worker::loader::Checkpoint& checkpoint, kernels::cpu::ThreadPool* pool,
                   int prompt_tokens, double pp_tokens_per_s, int gen_tokens,
                   const std::vector<DecodeRate>& decode, std::ostream& out);

}  // namespace rill::cli

#endif  // RILL_CLI_ROOFLINE_REPORT_H_
