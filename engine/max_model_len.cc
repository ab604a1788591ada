#include "engine/max_model_len.h"

#include "absl/strings/str_cat.h"

namespace rill::engine {

absl::StatusOr<int64_t> ResolveMaxModelLen(int64_t requested, int64_t model_context) {
  if (requested > 0 && model_context > 0 && requested > model_context) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_model_len ", requested, " exceeds the model's context length of ", model_context));
  }
  if (requested > 0) return requested;
  return model_context > 0 ? model_context : kFallbackMaxModelLen;
}

}  // namespace rill::engine
