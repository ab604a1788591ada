// The engine options (engine_options.h) as absl flags, defined here once for
// every binary that takes them: rill-engine, and `rill`, whose serve command
// passes on to its rill-engine child what the user set.
#ifndef RILL_ENGINE_ENGINE_FLAGS_H_
#define RILL_ENGINE_ENGINE_FLAGS_H_

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "engine/engine_args.h"
#include "engine/engine_options.h"

#define RILL_DECLARE_ENGINE_FLAG(type, name, default_value, check, help) \
  ABSL_DECLARE_FLAG(type, name);
RILL_ENGINE_OPTIONS(RILL_DECLARE_ENGINE_FLAG)
#undef RILL_DECLARE_ENGINE_FLAG

namespace rill::engine {

// EngineArgs holding the flags' values (call after absl::ParseCommandLine).
// Not validated: see ValidateEngineArgs.
EngineArgs EngineArgsFromFlags();

// "--name=value" for every engine flag whose value is not its default, for a
// launcher to hand to rill-engine.
std::vector<std::string> EngineFlagsChangedFromDefault();

// The source file defining the engine flags, as absl reports a flag's
// Filename(); --help filters select them by it.
const char* EngineFlagsFile();

}  // namespace rill::engine

#endif  // RILL_ENGINE_ENGINE_FLAGS_H_
