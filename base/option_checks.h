// The validators an option names in its declaration (the X-macro lists
// engine/engine_options.h and frontend/frontend_options.h). Each is called as
// check(flag_name, value) and returns InvalidArgument naming the flag, so a
// bad value reads the same from a binary's flags, `rill serve` and code that
// fills the args struct itself.
#ifndef RILL_BASE_OPTION_CHECKS_H_
#define RILL_BASE_OPTION_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rill::base {

// Every value is valid (or the component that reads it checks it).
struct AnyValue {
  template <class T>
  absl::Status operator()(absl::string_view, const T&) const {
    return absl::OkStatus();
  }
};

// Integers >= min.
struct AtLeast {
  explicit constexpr AtLeast(int64_t min) : min(min) {}
  template <class T>
  absl::Status operator()(absl::string_view flag, T value) const {
    if (static_cast<int64_t>(value) >= min) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be at least ", min, ", got ", value));
  }
  int64_t min;
};

// A share of something: (0, 1].
struct Fraction {
  absl::Status operator()(absl::string_view flag, double value) const;
};

// Empty, or an http:// URL (an OTLP/HTTP collector).
struct HttpUrlOrEmpty {
  absl::Status operator()(absl::string_view flag, const std::string& value) const;
};

// One of a fixed set of names.
class OneOf {
 public:
  template <class... Names>
  explicit OneOf(Names... names) : names_{names...} {}
  absl::Status operator()(absl::string_view flag, const std::string& value) const;

 private:
  std::vector<absl::string_view> names_;
};

}  // namespace rill::base

#endif  // RILL_BASE_OPTION_CHECKS_H_
