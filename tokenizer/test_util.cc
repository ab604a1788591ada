#include "tokenizer/test_util.h"

#include <sys/stat.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/model_dir.h"
#include "tests/util/python_runner.h"

namespace rill::tokenizer::testing {
namespace {

constexpr char kScript[] = "tokenizer/testdata/make_reference.py";

bool Exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

// Minimal little-endian reader over the whole file.
class Reader {
 public:
  explicit Reader(std::string data) : d_(std::move(data)) {}
  bool ok() const { return ok_; }
  template <typename T>
  T Get() {
    T v{};
    if (p_ + sizeof(T) > d_.size()) {
      ok_ = false;
      return v;
    }
    memcpy(&v, d_.data() + p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  std::string Str() {
    const uint64_t n = Get<uint64_t>();
    if (!ok_ || p_ + n > d_.size()) {
      ok_ = false;
      return "";
    }
    std::string s = d_.substr(p_, n);
    p_ += n;
    return s;
  }
  void Skip(size_t n) { p_ += n; }

 private:
  std::string d_;
  size_t p_ = 0;
  bool ok_ = true;
};

size_t ScalarSize(uint32_t type) {
  switch (type) {
    case 0: case 1: case 7: return 1;
    case 2: case 3: return 2;
    case 4: case 5: case 6: return 4;
    case 10: case 11: case 12: return 8;
    default: return 0;
  }
}

// A GGUF value reduced to what the tokenizer keys need.
struct GgufValue {
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<std::string> strs;
  std::vector<double> nums;
};

double ReadNumber(Reader* r, uint32_t type) {
  switch (type) {
    case 0: return r->Get<uint8_t>();
    case 1: return r->Get<int8_t>();
    case 2: return r->Get<uint16_t>();
    case 3: return r->Get<int16_t>();
    case 4: return r->Get<uint32_t>();
    case 5: return r->Get<int32_t>();
    case 6: return r->Get<float>();
    case 7: return r->Get<uint8_t>();
    case 10: return static_cast<double>(r->Get<uint64_t>());
    case 11: return static_cast<double>(r->Get<int64_t>());
    case 12: return r->Get<double>();
  }
  return 0;
}

bool ReadValue(Reader* r, uint32_t type, GgufValue* v) {
  if (type == 8) {
    v->s = r->Str();
  } else if (type == 9) {
    const uint32_t et = r->Get<uint32_t>();
    const uint64_t n = r->Get<uint64_t>();
    for (uint64_t k = 0; k < n && r->ok(); ++k) {
      if (et == 8) {
        v->strs.push_back(r->Str());
      } else if (ScalarSize(et) > 0) {
        v->nums.push_back(ReadNumber(r, et));
      } else {
        return false;  // Nested arrays: not used by tokenizer keys.
      }
    }
  } else if (ScalarSize(type) > 0) {
    v->f = ReadNumber(r, type);
    v->i = static_cast<int64_t>(v->f);
  } else {
    return false;
  }
  return r->ok();
}

}  // namespace

std::string DefaultModelPath() {
  const std::string p = base::DefaultModelFilePath();
  return Exists(p) ? p : "";
}

int RunPython(const std::string& script, const std::string& args) {
  const absl::StatusOr<std::string> py = rill::tests::util::VenvPython();
  if (!py.ok()) {
    fprintf(stderr,
            "Python venv not found: set RILL_VENV to the project venv "
            "(with tokenizers, gguf, jinja2 installed): %s\n",
            py.status().ToString().c_str());
    return -1;
  }
  const std::string cmd = absl::StrCat(*py, " ", script, " ", args);
  fprintf(stderr, "running: %s\n", cmd.c_str());
  return system(cmd.c_str());
}

std::string ReferenceDir() {
  static std::once_flag once;
  static std::string* dir = new std::string;
  std::call_once(once, [] {
    const char* tmp = getenv("TEST_TMPDIR");
    const std::string out = absl::StrCat(tmp ? tmp : "/tmp", "/ref");
    std::string args = absl::StrCat("--out ", out);
    const std::string model = DefaultModelPath();
    if (!model.empty()) absl::StrAppend(&args, " --gguf ", model);
    if (RunPython(kScript, args) == 0) *dir = out;
  });
  return *dir;
}

std::string HexDecode(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::vector<std::string> SplitTabs(const std::string& line) {
  return absl::StrSplit(line, '\t');
}

std::vector<int32_t> ParseIds(const std::string& s) {
  std::vector<int32_t> ids;
  for (absl::string_view p : absl::StrSplit(s, ' ', absl::SkipEmpty())) {
    ids.push_back(std::stoi(std::string(p)));
  }
  return ids;
}

std::vector<std::string> ParseHexList(const std::string& s) {
  return absl::StrSplit(s, ' ', absl::SkipEmpty());
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

absl::StatusOr<TokenizerSpec> ReadGgufTokenizer(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  // Metadata sits at the front; 16 MiB covers any tokenizer.
  std::string data(16 << 20, '\0');
  in.read(data.data(), data.size());
  data.resize(in.gcount());
  Reader r(std::move(data));
  if (r.Get<uint32_t>() != 0x46554747) {  // "GGUF"
    return absl::InvalidArgumentError("not a GGUF file");
  }
  const uint32_t version = r.Get<uint32_t>();
  if (version < 2) return absl::InvalidArgumentError("GGUF v1 unsupported");
  r.Get<uint64_t>();  // tensor count
  const uint64_t kv_count = r.Get<uint64_t>();
  TokenizerSpec spec;
  spec.pre = "default";
  for (uint64_t k = 0; k < kv_count; ++k) {
    const std::string key = r.Str();
    const uint32_t type = r.Get<uint32_t>();
    GgufValue v;
    if (!ReadValue(&r, type, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("bad GGUF value ", key));
    }
    if (key == "tokenizer.ggml.model") spec.model = v.s;
    if (key == "tokenizer.ggml.pre") spec.pre = v.s;
    if (key == "tokenizer.ggml.tokens") spec.tokens = v.strs;
    if (key == "tokenizer.ggml.merges") spec.merges = v.strs;
    if (key == "tokenizer.ggml.token_type") {
      for (double d : v.nums) spec.token_types.push_back(static_cast<int32_t>(d));
    }
    if (key == "tokenizer.ggml.scores") {
      for (double d : v.nums) spec.scores.push_back(static_cast<float>(d));
    }
    if (key == "tokenizer.ggml.bos_token_id") spec.bos_id = v.i;
    if (key == "tokenizer.ggml.eos_token_id") spec.eos_id = v.i;
    if (key == "tokenizer.ggml.padding_token_id") spec.pad_id = v.i;
    if (key == "tokenizer.ggml.unknown_token_id") spec.unk_id = v.i;
    if (key == "tokenizer.ggml.add_bos_token") spec.add_bos = v.i != 0;
    if (key == "tokenizer.ggml.add_eos_token") spec.add_eos = v.i != 0;
    if (key == "tokenizer.ggml.add_space_prefix") {
      spec.add_space_prefix = v.i != 0;
    }
    if (key == "tokenizer.chat_template") spec.chat_template = v.s;
  }
  return spec;
}

}  // namespace rill::tokenizer::testing
