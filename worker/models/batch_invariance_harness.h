// Test helper: one model's logits for a set of random sequences, run alone,
// all in one step, and after their contexts were prefilled in small chunks,
// for tests that a sequence's result does not depend on its company.
#ifndef RILL_WORKER_MODELS_BATCH_INVARIANCE_HARNESS_H_
#define RILL_WORKER_MODELS_BATCH_INVARIANCE_HARNESS_H_

#include <cstdint>
#include <random>
#include <vector>

#include "worker/models/causal_lm.h"

namespace rill::worker {

struct InvarianceRun {
  // Per sequence: its cached context and the new tokens of the measured step
  // (1: a decode, more: a prefill chunk).
  std::vector<std::vector<int32_t>> context, fresh;
  // Per sequence, the measured step's logits (every new token): alone in
  // its own cache; in one step with all the others (contexts prefilled
  // whole, as alone); in one step after the contexts were prefilled in
  // `chunk`-token pieces.
  std::vector<std::vector<float>> alone, batched, chunked;
};

// `num_sequences` sequences with token ids in [token_lo, token_hi]: every
// third has no context, the others 1..40 tokens; even ones bring 2..41 new
// tokens, odd ones 1. Each sequence has blocks_per_sequence blocks of
// block_size (interleaved across sequences). Failures are recorded as gtest
// failures.
InvarianceRun RunAloneBatchedChunked(CausalLm* model, std::mt19937* rng, int32_t token_lo,
                                     int32_t token_hi, int num_sequences = 32, int chunk = 7,
                                     int blocks_per_sequence = 6, int block_size = 16);

// sqrt(sum (a - b)^2 / sum b^2).
double RelativeL2(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_BATCH_INVARIANCE_HARNESS_H_
