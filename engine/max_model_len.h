// The longest sequence (prompt + output, in tokens) an engine or an offline
// model session serves, worked out in one place from what the user asked for
// and what the checkpoint supports.
#ifndef RILL_ENGINE_MAX_MODEL_LEN_H_
#define RILL_ENGINE_MAX_MODEL_LEN_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace rill::engine {

// When neither the user nor the checkpoint gives a context length.
inline constexpr int64_t kFallbackMaxModelLen = 2048;

// `requested` (0: the model's) against `model_context` (the checkpoint's
// max_position_embeddings; 0 when unknown): the model's context when nothing
// was requested, kFallbackMaxModelLen when neither is known, and
// InvalidArgument when more was requested than the model supports. Callers
// that clamp instead take .value_or(model_context).
absl::StatusOr<int64_t> ResolveMaxModelLen(int64_t requested, int64_t model_context);

}  // namespace rill::engine

#endif  // RILL_ENGINE_MAX_MODEL_LEN_H_
