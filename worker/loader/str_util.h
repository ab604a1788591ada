#ifndef RILL_WORKER_LOADER_STR_UTIL_H_
#define RILL_WORKER_LOADER_STR_UTIL_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace rill::worker::loader {

// The system absl is built with its own string_view type, which StrCat does
// not accept std::string_view for; this adapts at the call site.
inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace rill::worker::loader

#endif  // RILL_WORKER_LOADER_STR_UTIL_H_
