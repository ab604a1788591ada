#include "frontend/frontend_args.h"

namespace rill::frontend {

absl::Status ValidateFrontendArgs(const FrontendArgs& args) {
#define RILL_CHECK_FRONTEND_OPTION(type, name, default_value, check, help) \
  if (absl::Status s = check(#name, args.name); !s.ok()) return s;
  RILL_FRONTEND_OPTIONS(RILL_CHECK_FRONTEND_OPTION)
  RILL_FRONTEND_LAUNCH_OPTIONS(RILL_CHECK_FRONTEND_OPTION)
#undef RILL_CHECK_FRONTEND_OPTION
  return absl::OkStatus();
}

}  // namespace rill::frontend
