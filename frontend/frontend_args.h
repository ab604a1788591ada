// What a user sets on a frontend (FrontendArgs), one field per option of
// frontend_options.h, and its validation. FrontendOptions
// (frontend_server.h), what FrontendServer runs with, is made from it by
// MakeFrontendOptions (options_from_args.h).
#ifndef RILL_FRONTEND_FRONTEND_ARGS_H_
#define RILL_FRONTEND_FRONTEND_ARGS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "frontend/frontend_options.h"

namespace rill::frontend {

struct FrontendArgs {
#define RILL_FRONTEND_ARGS_FIELD(type, name, default_value, check, help) type name = default_value;
  RILL_FRONTEND_OPTIONS(RILL_FRONTEND_ARGS_FIELD)
  RILL_FRONTEND_LAUNCH_OPTIONS(RILL_FRONTEND_ARGS_FIELD)
#undef RILL_FRONTEND_ARGS_FIELD
};

// OK, or InvalidArgument naming the first option (as its --flag) whose value
// its declared check refuses.
absl::Status ValidateFrontendArgs(const FrontendArgs& args);

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_FRONTEND_ARGS_H_
