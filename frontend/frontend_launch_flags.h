// rill-frontend's launch options (RILL_FRONTEND_LAUNCH_OPTIONS in
// frontend_options.h: where it listens, its engine, credentials, ids) as absl
// flags. Only rill-frontend links them: `rill serve` sets these for each
// frontend itself, and has flags of its own by some of these names.
#ifndef RILL_FRONTEND_FRONTEND_LAUNCH_FLAGS_H_
#define RILL_FRONTEND_FRONTEND_LAUNCH_FLAGS_H_

#include "absl/flags/declare.h"
#include "frontend/frontend_args.h"
#include "frontend/frontend_options.h"

#define RILL_DECLARE_FRONTEND_LAUNCH_FLAG(type, name, default_value, check, help) \
  ABSL_DECLARE_FLAG(type, name);
RILL_FRONTEND_LAUNCH_OPTIONS(RILL_DECLARE_FRONTEND_LAUNCH_FLAG)
#undef RILL_DECLARE_FRONTEND_LAUNCH_FLAG

namespace rill::frontend {

// FrontendArgs holding every frontend flag's value, these and frontend_flags.h's
// (call after absl::ParseCommandLine). Not validated: see ValidateFrontendArgs.
FrontendArgs FrontendArgsFromFlags();

// The source file defining these flags (see FrontendFlagsFile).
const char* FrontendLaunchFlagsFile();

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_FRONTEND_LAUNCH_FLAGS_H_
