// The `rill` command-line tool: one binary, one subcommand per job.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "base/flags_usage.h"
#include "cli/bench_model_command.h"
#include "cli/device_info_command.h"
#include "cli/generate_command.h"
#include "cli/serve_command.h"
#include "engine/engine_flags.h"
#include "frontend/frontend_flags.h"

namespace {

struct Command {
  const char* name;
  const char* help;
  int (*run)(int argc, char** argv);
  // What `rill <name> --help` lists: the flags of these files, and these
  // engine options by name.
  std::vector<std::string> flag_files;
  std::vector<std::string> engine_flags;
};

// The engine options the offline commands read (they run the model here).
const std::vector<std::string> kModelFlags = {"model", "threads", "backend", "kv_cache_dtype"};

const Command kCommands[] = {
    {"serve",
     "engine + workers + frontends on this machine (--port, --frontends, --tensor_parallel_size, "
     "and every rill-engine and rill-frontend option)",
     rill::cli::RunServe,
     {"cli/serve_command.cc", rill::engine::EngineFlagsFile(),
      rill::frontend::FrontendFlagsFile()},
     {}},
    {"generate", "stream a completion of --prompt (--chat, --max_tokens, --temperature, ...)",
     rill::cli::RunGenerate, {"cli/generate_command.cc", "cli/common_flags.cc"}, kModelFlags},
    {"tokenize", "print the token ids of --prompt", rill::cli::RunTokenize,
     {"cli/generate_command.cc"}, {"model"}},
    {"detokenize", "print the text of --ids=1,2,3", rill::cli::RunDetokenize,
     {"cli/generate_command.cc"}, {"model"}},
    {"bench-model", "model-runtime throughput: prefill and batched decode tokens/s",
     rill::cli::RunBenchModel, {"cli/bench_model_command.cc", "cli/common_flags.cc"},
     kModelFlags},
    {"device-info", "print the compute backend this machine uses and why",
     rill::cli::RunDeviceInfo, {}, {"backend"}},
};

void PrintUsage() {
  std::cerr << "usage: rill <command> [--flags]\ncommands:\n";
  for (const Command& c : kCommands) std::cerr << "  " << c.name << ": " << c.help << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  absl::SetProgramUsageMessage("rill <command> [--flags]; run `rill help` for commands");
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0) {
    PrintUsage();
    return argc < 2 ? 2 : 0;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    // Flags after the subcommand; positional arguments are passed on.
    std::vector<char*> rest_argv;
    rest_argv.push_back(argv[0]);
    for (int i = 2; i < argc; ++i) rest_argv.push_back(argv[i]);
    rill::base::HandleHelpFlag(
        rest_argv.size(), rest_argv.data(),
        {absl::StrCat("rill ", c.name, " [--flags]: ", c.help), c.flag_files, c.engine_flags});
    std::vector<char*> positional = absl::ParseCommandLine(rest_argv.size(), rest_argv.data());
    return c.run(positional.size(), positional.data());
  }
  std::cerr << "unknown command '" << argv[1] << "'\n";
  PrintUsage();
  return 2;
}
