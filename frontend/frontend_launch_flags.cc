#include "frontend/frontend_launch_flags.h"

#include "absl/flags/flag.h"
#include "frontend/frontend_flags.h"

#define RILL_DEFINE_FRONTEND_LAUNCH_FLAG(type, name, default_value, check, help) \
  ABSL_FLAG(type, name, default_value, help);
RILL_FRONTEND_LAUNCH_OPTIONS(RILL_DEFINE_FRONTEND_LAUNCH_FLAG)
#undef RILL_DEFINE_FRONTEND_LAUNCH_FLAG

namespace rill::frontend {

FrontendArgs FrontendArgsFromFlags() {
  FrontendArgs args;
  ReadFrontendFlags(&args);
#define RILL_READ_FRONTEND_LAUNCH_FLAG(type, name, default_value, check, help) \
  args.name = absl::GetFlag(FLAGS_##name);
  RILL_FRONTEND_LAUNCH_OPTIONS(RILL_READ_FRONTEND_LAUNCH_FLAG)
#undef RILL_READ_FRONTEND_LAUNCH_FLAG
  return args;
}

const char* FrontendLaunchFlagsFile() { return __FILE__; }

}  // namespace rill::frontend
