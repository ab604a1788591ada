// --help for every Rill binary. absl's own --help lists only flags defined
// in <binary>.cc or <binary>_main.cc (none of Rill's: "No flags matched.") and
// exits 1; this lists the flags a binary takes, from the files that define
// them, and exits 0.
#ifndef RILL_BASE_FLAGS_USAGE_H_
#define RILL_BASE_FLAGS_USAGE_H_

#include <string>
#include <vector>

namespace rill::base {

struct FlagsHelp {
  std::string usage;  // First line(s) printed: what the binary does, how to call it.
  // Flags defined in these source files are listed (paths as the build
  // passes them, e.g. "engine/service/engine_main.cc"), grouped by file.
  std::vector<std::string> files;
  // And these flags by name, wherever they are defined (e.g. the few engine
  // options an offline command reads).
  std::vector<std::string> flags;
};

// Call first in main(), before absl::ParseCommandLine: sets absl's usage
// filters to `help`, and when argv asks for help (--help, -help, --helpshort,
// -h) prints `help` to stdout and exits 0.
void HandleHelpFlag(int argc, char** argv, const FlagsHelp& help);

// The text HandleHelpFlag prints (for tests).
std::string FlagsHelpText(const FlagsHelp& help);

}  // namespace rill::base

#endif  // RILL_BASE_FLAGS_USAGE_H_
