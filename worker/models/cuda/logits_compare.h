// Part of cuda_model_check: how the CUDA Llama's logits are compared with a
// reference (the CPU Llama, or one tensor-parallel rank with the whole model):
// relative L2 error and top-1 agreement per row, and the bf16 pass
// thresholds.
#ifndef RILL_WORKER_MODELS_CUDA_LOGITS_COMPARE_H_
#define RILL_WORKER_MODELS_CUDA_LOGITS_COMPARE_H_

#include <vector>

namespace rill::worker {

// Pass thresholds. BF16 keeps 8 significant bits: every weight is rounded by
// up to 2^-9 relative and every activation (residual, q/k/v, attention and
// MLP outputs) again at each layer, so the logits drift ~1e-2 in relative L2
// from the f32 CPU model, growing slowly with depth. 5e-2 on the mean leaves
// ~5x margin for that, while a real bug (a transposed or misfused matrix,
// wrong RoPE pairing, wrong GQA head mapping, a stale cache slot) gives
// errors of order 1. Argmax can flip where the top two logits are within
// that noise, which happens on a few percent of rows; a broken model agrees
// on almost none, so 90% separates the two.
inline constexpr double kMaxMeanRelL2 = 5e-2;
inline constexpr double kMinTop1 = 0.90;

struct LogitStats {
  std::vector<double> rel_l2;
  int agree = 0;
  bool finite = true;

  double Mean() const;
  double Max() const;
  double Top1() const;
  bool Pass() const;
};

int ArgMax(const float* x, int n);

// Compares the rows (of `vocab` floats) of `got` with those of `want`.
void CompareLogits(const std::vector<float>& got, const std::vector<float>& want, int vocab,
                   LogitStats* stats);

// One line: rows, rel L2 mean and max, top-1 agreement, PASS/FAIL.
void PrintLogitStats(const char* what, const LogitStats& s);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_CUDA_LOGITS_COMPARE_H_
