#ifndef RILL_CLI_SERVE_COMMAND_H_
#define RILL_CLI_SERVE_COMMAND_H_

namespace rill::cli {

// `rill serve`: engine + workers + frontends on this machine until SIGINT/SIGTERM.
int RunServe(int argc, char** argv);

}  // namespace rill::cli

#endif  // RILL_CLI_SERVE_COMMAND_H_
