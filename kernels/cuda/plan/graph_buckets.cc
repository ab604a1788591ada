#include "kernels/cuda/plan/graph_buckets.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace rill::kernels::cuda {

absl::StatusOr<GraphBuckets> GraphBuckets::ForMaxBatch(int max_batch) {
  if (max_batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max batch for CUDA graphs must be > 0, got ", max_batch));
  }
  std::vector<int> sizes;
  for (int s : {1, 2, 4}) {
    if (s <= max_batch) sizes.push_back(s);
  }
  for (int s = 8; s <= max_batch; s += 8) sizes.push_back(s);
  if (sizes.back() != max_batch) sizes.push_back(max_batch);
  return GraphBuckets(std::move(sizes));
}

absl::StatusOr<GraphBuckets> GraphBuckets::FromSizes(std::vector<int> sizes) {
  if (sizes.empty()) return absl::InvalidArgumentError("no CUDA graph batch sizes given");
  for (int s : sizes) {
    if (s <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("CUDA graph batch sizes must be > 0, got ", s));
    }
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return GraphBuckets(std::move(sizes));
}

absl::StatusOr<int> GraphBuckets::BucketFor(int batch) const {
  if (batch <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch size must be > 0, got ", batch));
  }
  auto it = std::lower_bound(sizes_.begin(), sizes_.end(), batch);
  if (it == sizes_.end()) {
    return absl::OutOfRangeError(
        absl::StrCat("batch ", batch, " exceeds the largest graph bucket ", sizes_.back()));
  }
  return *it;
}

}  // namespace rill::kernels::cuda
