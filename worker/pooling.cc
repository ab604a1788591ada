#include "worker/pooling.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rill::worker {

absl::StatusOr<std::vector<float>> Pool(const float* hidden, int64_t num_tokens, int64_t width,
                                        const PoolingSpec& spec) {
  if (num_tokens <= 0) return absl::InvalidArgumentError("pooling needs at least one token");
  if (spec.dimensions < 0 || spec.dimensions > width) {
    return absl::InvalidArgumentError(absl::StrCat("dimensions ", spec.dimensions,
                                                   " is outside [0, ", width, "]"));
  }
  const int64_t dim = spec.dimensions > 0 ? spec.dimensions : width;
  // Accumulate in double: mean pooling over long sequences stays exact to
  // float precision whatever the order of the batch.
  std::vector<double> acc(dim, 0.0);
  switch (spec.type) {
    case PoolingType::kMean:
      for (int64_t t = 0; t < num_tokens; ++t) {
        for (int64_t i = 0; i < dim; ++i) acc[i] += hidden[t * width + i];
      }
      for (double& a : acc) a /= static_cast<double>(num_tokens);
      break;
    case PoolingType::kCls:
      for (int64_t i = 0; i < dim; ++i) acc[i] = hidden[i];
      break;
    case PoolingType::kLast:
      for (int64_t i = 0; i < dim; ++i) acc[i] = hidden[(num_tokens - 1) * width + i];
      break;
  }
  if (spec.normalize) {
    double norm = 0.0;
    for (double a : acc) norm += a * a;
    norm = std::max(std::sqrt(norm), 1e-12);  // torch.nn.functional.normalize's eps.
    for (double& a : acc) a /= norm;
  }
  return std::vector<float>(acc.begin(), acc.end());
}

}  // namespace rill::worker
