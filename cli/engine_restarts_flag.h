// `--engine_restarts=N` on a rill-engine command line: how many times
// `rill serve` restarted this engine (or replica) before, which the engine
// exports as rill:engine_restarts_total.
#ifndef RILL_CLI_ENGINE_RESTARTS_FLAG_H_
#define RILL_CLI_ENGINE_RESTARTS_FLAG_H_

#include <string>
#include <vector>

namespace rill::cli {

// Replaces the flag in `argv`, or appends it (after the user's flags, so it
// wins).
void SetEngineRestartsFlag(int n, std::vector<std::string>* argv);

}  // namespace rill::cli

#endif  // RILL_CLI_ENGINE_RESTARTS_FLAG_H_
