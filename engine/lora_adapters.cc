#include "engine/lora_adapters.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rill::engine {

bool AbslParseFlag(absl::string_view text, LoraAdapters* out, std::string* error) {
  out->adapters.clear();
  if (text.empty()) return true;
  for (absl::string_view spec : absl::StrSplit(text, ',')) {
    const size_t eq = spec.find('=');
    if (eq == absl::string_view::npos || eq == 0 || eq + 1 == spec.size()) {
      *error = absl::StrCat("--lora wants name=path, got '", spec, "'");
      return false;
    }
    out->adapters.emplace_back(std::string(spec.substr(0, eq)), std::string(spec.substr(eq + 1)));
  }
  return true;
}

std::string AbslUnparseFlag(const LoraAdapters& loras) {
  std::string out;
  for (const auto& [name, path] : loras.adapters) {
    absl::StrAppend(&out, out.empty() ? "" : ",", name, "=", path);
  }
  return out;
}

}  // namespace rill::engine
