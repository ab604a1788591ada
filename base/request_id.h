// The one bound on client request ids, checked by the frontend (per request,
// before anything is kept) and by the engine (for direct clients). Ids are
// kept for as long as a request runs and in the engine's finished-status
// table, so an unbounded id is unbounded memory.
#ifndef RILL_BASE_REQUEST_ID_H_
#define RILL_BASE_REQUEST_ID_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace rill {

inline constexpr size_t kMaxRequestIdBytes = 256;

// INVALID_ARGUMENT naming the limit when `id` is longer than it.
inline absl::Status ValidateRequestIdLength(std::string_view id) {
  if (id.size() <= kMaxRequestIdBytes) return absl::OkStatus();
  return absl::InvalidArgumentError("request_id: " + std::to_string(id.size()) +
                                    " bytes is over the limit of " +
                                    std::to_string(kMaxRequestIdBytes) + " bytes");
}

}  // namespace rill

#endif  // RILL_BASE_REQUEST_ID_H_
