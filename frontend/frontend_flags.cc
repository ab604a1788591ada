#include "frontend/frontend_flags.h"

#include "absl/flags/flag.h"
#include "base/changed_flag.h"

#define RILL_DEFINE_FRONTEND_FLAG(type, name, default_value, check, help) \
  ABSL_FLAG(type, name, default_value, help);
RILL_FRONTEND_OPTIONS(RILL_DEFINE_FRONTEND_FLAG)
#undef RILL_DEFINE_FRONTEND_FLAG

namespace rill::frontend {

void ReadFrontendFlags(FrontendArgs* args) {
#define RILL_READ_FRONTEND_FLAG(type, name, default_value, check, help) \
  args->name = absl::GetFlag(FLAGS_##name);
  RILL_FRONTEND_OPTIONS(RILL_READ_FRONTEND_FLAG)
#undef RILL_READ_FRONTEND_FLAG
}

std::vector<std::string> FrontendFlagsChangedFromDefault() {
  std::vector<std::string> flags;
  const FrontendArgs defaults;
#define RILL_CHANGED_FRONTEND_FLAG(type, name, default_value, check, help) \
  base::AppendIfChanged(#name, FLAGS_##name, defaults.name, &flags);
  RILL_FRONTEND_OPTIONS(RILL_CHANGED_FRONTEND_FLAG)
#undef RILL_CHANGED_FRONTEND_FLAG
  return flags;
}

const char* FrontendFlagsFile() { return __FILE__; }

}  // namespace rill::frontend
