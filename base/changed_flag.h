// What a launcher passes on to a child binary that declares the same flags:
// "--name=value" for a flag whose value differs from its declared default
// (compared as the flag spells values, so "10s" and "10000ms" are equal).
#ifndef RILL_BASE_CHANGED_FLAG_H_
#define RILL_BASE_CHANGED_FLAG_H_

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rill::base {

template <class T>
void AppendIfChanged(absl::string_view name, const absl::Flag<T>& flag, const T& default_value,
                     std::vector<std::string>* out) {
  std::string value = absl::UnparseFlag<T>(absl::GetFlag(flag));
  if (value != absl::UnparseFlag<T>(default_value)) {
    out->push_back(absl::StrCat("--", name, "=", value));
  }
}

}  // namespace rill::base

#endif  // RILL_BASE_CHANGED_FLAG_H_
