// FrontendOptions (what FrontendServer runs with) from FrontendArgs (what the
// user set, frontend_args.h): the one place an option's value is put where
// the server reads it, in the server's units.
#ifndef RILL_FRONTEND_OPTIONS_FROM_ARGS_H_
#define RILL_FRONTEND_OPTIONS_FROM_ARGS_H_

#include "absl/status/statusor.h"
#include "frontend/frontend_args.h"
#include "frontend/frontend_server.h"

namespace rill::frontend {

// Validates `args` (ValidateFrontendArgs) and reads the files it names
// (--admin_token_file, --engine_secret_file): InvalidArgument naming the
// flag when one is bad. The metrics and tracer pointers are left null for
// the caller, which owns them.
absl::StatusOr<FrontendOptions> MakeFrontendOptions(const FrontendArgs& args);

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_OPTIONS_FROM_ARGS_H_
