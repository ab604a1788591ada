#include "engine/engine_flags.h"

#include "absl/flags/flag.h"
#include "base/changed_flag.h"

#define RILL_DEFINE_ENGINE_FLAG(type, name, default_value, check, help) \
  ABSL_FLAG(type, name, default_value, help);
RILL_ENGINE_OPTIONS(RILL_DEFINE_ENGINE_FLAG)
#undef RILL_DEFINE_ENGINE_FLAG

namespace rill::engine {

EngineArgs EngineArgsFromFlags() {
  EngineArgs args;
#define RILL_READ_ENGINE_FLAG(type, name, default_value, check, help) \
  args.name = absl::GetFlag(FLAGS_##name);
  RILL_ENGINE_OPTIONS(RILL_READ_ENGINE_FLAG)
#undef RILL_READ_ENGINE_FLAG
  return args;
}

std::vector<std::string> EngineFlagsChangedFromDefault() {
  std::vector<std::string> flags;
  const EngineArgs defaults;
#define RILL_CHANGED_ENGINE_FLAG(type, name, default_value, check, help) \
  base::AppendIfChanged(#name, FLAGS_##name, defaults.name, &flags);
  RILL_ENGINE_OPTIONS(RILL_CHANGED_ENGINE_FLAG)
#undef RILL_CHANGED_ENGINE_FLAG
  return flags;
}

const char* EngineFlagsFile() { return __FILE__; }

}  // namespace rill::engine
