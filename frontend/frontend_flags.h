// The frontend options that `rill serve` shares with rill-frontend
// (RILL_FRONTEND_OPTIONS in frontend_options.h) as absl flags, defined here
// once for both binaries: `rill serve` passes on to each frontend what the
// user set. rill-frontend's own launch flags are frontend_launch_flags.h.
#ifndef RILL_FRONTEND_FRONTEND_FLAGS_H_
#define RILL_FRONTEND_FRONTEND_FLAGS_H_

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "frontend/frontend_args.h"
#include "frontend/frontend_options.h"

#define RILL_DECLARE_FRONTEND_FLAG(type, name, default_value, check, help) \
  ABSL_DECLARE_FLAG(type, name);
RILL_FRONTEND_OPTIONS(RILL_DECLARE_FRONTEND_FLAG)
#undef RILL_DECLARE_FRONTEND_FLAG

namespace rill::frontend {

// Sets the RILL_FRONTEND_OPTIONS fields of `args` from the flags (call after
// absl::ParseCommandLine); the launch fields are left as they are.
void ReadFrontendFlags(FrontendArgs* args);

// "--name=value" for every flag defined here whose value is not its default,
// for a launcher to hand to each rill-frontend.
std::vector<std::string> FrontendFlagsChangedFromDefault();

// The source file defining these flags, as absl reports a flag's
// Filename(); --help filters select them by it.
const char* FrontendFlagsFile();

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_FRONTEND_FLAGS_H_
