// Pooling of a sequence's final hidden states into one embedding (the
// engine's Encode). Pure math on floats; no model knowledge.
#ifndef RILL_WORKER_POOLING_H_
#define RILL_WORKER_POOLING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::worker {

enum class PoolingType {
  kMean,  // Average over all tokens (sentence-transformers' default).
  kCls,   // The first token ([CLS] for BERT; the first prompt token on a decoder).
  kLast,  // The last token (decoder embedding models).
};

struct PoolingSpec {
  PoolingType type = PoolingType::kMean;
  bool normalize = true;  // L2-normalize the result.
  // > 0: keep the first `dimensions` features (Matryoshka truncation),
  // applied before normalization so a truncated embedding is unit length too.
  int64_t dimensions = 0;
};

// hidden: [num_tokens][width] row-major. InvalidArgument when num_tokens is
// 0 or dimensions is negative or exceeds width.
absl::StatusOr<std::vector<float>> Pool(const float* hidden, int64_t num_tokens, int64_t width,
                                        const PoolingSpec& spec);

}  // namespace rill::worker

#endif  // RILL_WORKER_POOLING_H_
