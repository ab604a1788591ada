// Batch-size buckets for CUDA-graph decode: a graph is captured once per
// bucket and a batch is padded up to the smallest bucket that holds it, so a
// handful of graphs cover every batch size up to the largest bucket.
#ifndef RILL_KERNELS_CUDA_PLAN_GRAPH_BUCKETS_H_
#define RILL_KERNELS_CUDA_PLAN_GRAPH_BUCKETS_H_

#include <vector>

#include "absl/status/statusor.h"

namespace rill::kernels::cuda {

class GraphBuckets {
 public:
  // Default buckets 1, 2, 4, then every multiple of 8 up to max_batch (and
  // max_batch itself when it is not a multiple of 8).
  static absl::StatusOr<GraphBuckets> ForMaxBatch(int max_batch);
  // Explicit sizes: each > 0; duplicates are dropped and the list is sorted.
  static absl::StatusOr<GraphBuckets> FromSizes(std::vector<int> sizes);

  // Smallest bucket >= batch. InvalidArgument for batch <= 0, OutOfRange when
  // batch exceeds the largest bucket (the caller then runs eagerly).
  absl::StatusOr<int> BucketFor(int batch) const;

  const std::vector<int>& sizes() const { return sizes_; }
  int max_batch() const { return sizes_.back(); }

 private:
  explicit GraphBuckets(std::vector<int> sizes) : sizes_(std::move(sizes)) {}
  std::vector<int> sizes_;  // sorted, unique, non-empty
};

}  // namespace rill::kernels::cuda

#endif  // RILL_KERNELS_CUDA_PLAN_GRAPH_BUCKETS_H_
