#include "base/option_checks.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"

namespace rill::base {

absl::Status Fraction::operator()(absl::string_view flag, double value) const {
  if (value > 0 && value <= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be in (0, 1], got ", value));
}

absl::Status HttpUrlOrEmpty::operator()(absl::string_view flag, const std::string& value) const {
  constexpr absl::string_view kScheme = "http://";
  if (value.empty() || (absl::StartsWith(value, kScheme) && value.size() > kScheme.size())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, " must be an http://host:port URL (OTLP/HTTP), got '", value, "'"));
}

absl::Status OneOf::operator()(absl::string_view flag, const std::string& value) const {
  if (std::find(names_.begin(), names_.end(), value) != names_.end()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": unknown ", flag, " '", value,
                                                 "' (one of ", absl::StrJoin(names_, ", "), ")"));
}

}  // namespace rill::base
