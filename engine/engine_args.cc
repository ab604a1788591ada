#include "engine/engine_args.h"

#include "absl/flags/marshalling.h"

namespace rill::engine {

absl::Status ValidateEngineArgs(const EngineArgs& args) {
#define RILL_CHECK_ENGINE_OPTION(type, name, default_value, check, help) \
  if (absl::Status s = check(#name, args.name); !s.ok()) return s;
  RILL_ENGINE_OPTIONS(RILL_CHECK_ENGINE_OPTION)
#undef RILL_CHECK_ENGINE_OPTION
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::string>> EngineOptionValues(const EngineArgs& args) {
  std::vector<std::pair<std::string, std::string>> values;
#define RILL_ENGINE_OPTION_VALUE(type, name, default_value, check, help) \
  values.emplace_back(#name, absl::UnparseFlag<type>(args.name));
  RILL_ENGINE_OPTIONS(RILL_ENGINE_OPTION_VALUE)
#undef RILL_ENGINE_OPTION_VALUE
  return values;
}

}  // namespace rill::engine
