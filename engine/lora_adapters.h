// The LoRA adapters an engine loads at start-up, as --lora spells them:
// name=path,name=path (PEFT directories). A flag type of its own so a
// malformed entry is refused while the command line is parsed, naming it.
#ifndef RILL_ENGINE_LORA_ADAPTERS_H_
#define RILL_ENGINE_LORA_ADAPTERS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace rill::engine {

struct LoraAdapters {
  // {name, path}. The operator's command line names them, so any path is
  // accepted (AddLora's --lora_root rule does not apply).
  std::vector<std::pair<std::string, std::string>> adapters;

  bool empty() const { return adapters.empty(); }
};

// absl flag marshalling (found by ADL).
bool AbslParseFlag(absl::string_view text, LoraAdapters* out, std::string* error);
std::string AbslUnparseFlag(const LoraAdapters& loras);

}  // namespace rill::engine

#endif  // RILL_ENGINE_LORA_ADAPTERS_H_
