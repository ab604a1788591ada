#include "cli/engine_restarts_flag.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rill::cli {

void SetEngineRestartsFlag(int n, std::vector<std::string>* argv) {
  const std::string flag = absl::StrCat("--engine_restarts=", n);
  for (std::string& arg : *argv) {
    if (absl::StartsWith(arg, "--engine_restarts=")) {
      arg = flag;
      return;
    }
  }
  argv->push_back(flag);
}

}  // namespace rill::cli
