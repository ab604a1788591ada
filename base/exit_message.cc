#include "base/exit_message.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/strip.h"

namespace rill::base {

namespace {
constexpr size_t kMaxBytes = 4096;
}  // namespace

void WriteExitMessage(const std::string& path, std::string_view message) {
  if (path.empty()) return;
  std::string line(message.substr(0, kMaxBytes));
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  // Written aside and renamed, so a reader never sees half a line.
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  std::fprintf(f, "%s\n", line.c_str());
  if (std::fclose(f) == 0) std::rename(tmp.c_str(), path.c_str());
}

std::string ReadExitMessage(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(ss.str()));
}

}  // namespace rill::base
