#include "engine/llama_cpp_vocab_goldens.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/model_dir.h"

namespace rill::engine::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string LlamaCppVocabPath(const std::string& name) {
  return absl::StrCat(base::LlamaVocabPath(), "/ggml-vocab-", name, ".gguf");
}

absl::StatusOr<std::vector<Golden>> ReadLlamaCppGoldens(const std::string& gguf_path) {
  std::error_code ec;
  for (const char* ext : {".inp", ".out"}) {
    if (!std::filesystem::is_regular_file(gguf_path + ext, ec)) {
      return absl::NotFoundError(absl::StrCat(gguf_path, ext, " is missing"));
    }
  }
  const std::string inp = ReadFile(gguf_path + ".inp");
  const std::string out = ReadFile(gguf_path + ".out");
  std::vector<std::string> texts;
  constexpr std::string_view kSep = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  while (pos < inp.size()) {
    const size_t next = inp.find(kSep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + kSep.size();
  }
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (texts.size() != lines.size()) {
    return absl::DataLossError(absl::StrCat(gguf_path, ": ", texts.size(), " texts but ",
                                            lines.size(), " lines of ids"));
  }
  std::vector<Golden> goldens;
  for (size_t i = 0; i < texts.size() && i < lines.size(); ++i) {
    Golden g{texts[i], {}};
    for (absl::string_view id : absl::StrSplit(lines[i], ' ', absl::SkipEmpty())) {
      g.ids.push_back(std::stoi(std::string(id)));
    }
    goldens.push_back(std::move(g));
  }
  return goldens;
}

std::string GtestName(std::string name) {
  for (char& c : name) c = absl::ascii_isalnum(c) ? c : '_';
  return name;
}

}  // namespace rill::engine::testing
