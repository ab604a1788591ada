// The `rill` command-line tool: one binary, one subcommand per job.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "cli/bench_model_command.h"
#include "cli/device_info_command.h"
#include "cli/generate_command.h"
#include "cli/serve_command.h"

namespace {

struct Command {
  const char* name;
  const char* help;
  int (*run)(int argc, char** argv);
};

const Command kCommands[] = {
    {"serve", "engine + workers + frontends on this machine (--port, --frontends, --tensor_parallel_size)",
     rill::cli::RunServe},
    {"generate", "stream a completion of --prompt (--chat, --max_tokens, --temperature, ...)",
     rill::cli::RunGenerate},
    {"tokenize", "print the token ids of --prompt", rill::cli::RunTokenize},
    {"detokenize", "print the text of --ids=1,2,3", rill::cli::RunDetokenize},
    {"bench-model", "model-runtime throughput: prefill and batched decode tokens/s",
     rill::cli::RunBenchModel},
    {"device-info", "print the compute backend this machine uses and why",
     rill::cli::RunDeviceInfo},
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
    std::vector<char*> positional = absl::ParseCommandLine(rest_argv.size(), rest_argv.data());
    return c.run(positional.size(), positional.data());
  }
  std::cerr << "unknown command '" << argv[1] << "'\n";
  PrintUsage();
  return 2;
}
