#include "base/flags_usage.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rill::base {
namespace {

// The entry of `files` that `filename` is, or "" (matched on the path's end:
// the build may prefix it, e.g. with external/ or an absolute root).
std::string MatchingFile(absl::string_view filename, const std::vector<std::string>& files) {
  for (const std::string& f : files) {
    if (filename == f || absl::EndsWith(filename, "/" + f)) return f;
  }
  return "";
}

bool Listed(const absl::CommandLineFlag& flag, const FlagsHelp& help) {
  return !MatchingFile(flag.Filename(), help.files).empty() ||
         std::find(help.flags.begin(), help.flags.end(), flag.Name()) != help.flags.end();
}

bool AsksForHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strcmp(a, "--") == 0) return false;  // Positional arguments follow.
    for (const char* h : {"--help", "-help", "--helpshort", "-helpshort", "-h"}) {
      if (std::strcmp(a, h) == 0) return true;
    }
  }
  return false;
}

}  // namespace

std::string FlagsHelpText(const FlagsHelp& help) {
  // group title -> flag name -> entry; sorted so the output is stable.
  std::map<std::string, std::map<std::string, std::string>> groups;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!Listed(*flag, help)) continue;
    std::string file = MatchingFile(flag->Filename(), help.files);
    const std::string title = file.empty() ? "Shared flags" : "Flags from " + file;
    std::string entry = absl::StrCat("  --", flag->Name(), " (default: ", flag->DefaultValue());
    absl::StrAppend(&entry, ")\n      ", flag->Help(), "\n");
    groups[title][std::string(flag->Name())] = entry;
  }
  std::string out = absl::StrCat(help.usage, "\n");
  for (const auto& [title, entries] : groups) {
    absl::StrAppend(&out, "\n", title, ":\n");
    for (const auto& [name, entry] : entries) absl::StrAppend(&out, entry);
  }
  if (groups.empty()) absl::StrAppend(&out, "\n(no flags)\n");
  return out;
}

void HandleHelpFlag(int argc, char** argv, const FlagsHelp& help) {
  // absl's --helpfull/--helpon still work; its short forms list our files.
  absl::FlagsUsageConfig config;
  config.contains_helpshort_flags = [files = help.files](absl::string_view filename) {
    return !MatchingFile(filename, files).empty();
  };
  config.contains_help_flags = config.contains_helpshort_flags;
  absl::SetFlagsUsageConfig(config);
  if (!AsksForHelp(argc, argv)) return;
  std::cout << FlagsHelpText(help) << std::flush;
  std::exit(0);
}

}  // namespace rill::base
