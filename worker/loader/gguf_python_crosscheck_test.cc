// Cross-checks GgufFile against the reference `gguf` Python package on the
// default model: tensor names, types, shapes, offsets, sizes, data offset and
// every integer / string scalar KV. Python is the project venv's
// (tests/util/python_runner.h).

#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/model_dir.h"
#include "tests/util/python_runner.h"
#include "worker/loader/gguf.h"

namespace rill::worker::loader {
namespace {

bool Exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

std::string ScriptPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  if (srcdir != nullptr && ws != nullptr) {
    std::string p = absl::StrCat(srcdir, "/", ws, "/worker/loader/gguf_dump.py");
    if (Exists(p)) return p;
  }
  return "worker/loader/gguf_dump.py";
}

std::string Hex(std::string_view s) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

TEST(GgufPythonCrossCheck, MatchesReferenceReader) {
  const std::string model = base::DefaultModelFilePath();
  if (!Exists(model)) GTEST_SKIP() << "default model not found at " << model;
  const std::string script = ScriptPath();
  const absl::StatusOr<std::string> python = rill::tests::util::VenvPython();
  ASSERT_TRUE(python.ok())
      << "no Python found: set RILL_VENV to the project venv (with the gguf package): "
      << python.status();
  std::string cmd = absl::StrCat("'", *python, "' '", script, "' '", model, "' 2>&1");
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int rc = ::pclose(p);
  ASSERT_EQ(rc, 0) << cmd << "\n" << out.substr(0, 4000);

  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(model);
  ASSERT_TRUE(f.ok()) << f.status();
  std::set<std::string> ours, theirs;
  for (const GgufTensorInfo& t : (*f)->tensors()) {
    ours.insert(absl::StrCat("T\t", std::string(t.name), "\t", static_cast<uint32_t>(t.type), "\t",
                             absl::StrJoin(t.ne, ","), "\t", t.offset, "\t", t.nbytes));
  }
  ours.insert(absl::StrCat("D\t", (*f)->data_offset()));
  for (const GgufKv& kv : (*f)->metadata()) {
    if (kv.value.type() == GgufValueType::kString) {
      ours.insert(absl::StrCat("S\t", std::string(kv.key), "\t", Hex(*kv.value.AsString())));
    } else if (kv.value.type() != GgufValueType::kArray && kv.value.type() != GgufValueType::kBool &&
               kv.value.type() != GgufValueType::kFloat32 && kv.value.type() != GgufValueType::kFloat64) {
      ours.insert(absl::StrCat("K\t", std::string(kv.key), "\t", *kv.value.AsInt64()));
    }
  }
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) theirs.insert(std::string(line));
  EXPECT_GE(theirs.size(), 272u + 1u + 20u) << "unexpected python output:\n" << out.substr(0, 2000);
  std::vector<std::string> only_ours, only_theirs;
  for (const std::string& s : ours) if (!theirs.count(s)) only_ours.push_back(s);
  for (const std::string& s : theirs) if (!ours.count(s)) only_theirs.push_back(s);
  EXPECT_TRUE(only_ours.empty()) << "only in ours:\n" << absl::StrJoin(only_ours, "\n").substr(0, 3000);
  EXPECT_TRUE(only_theirs.empty()) << "only in python:\n" << absl::StrJoin(only_theirs, "\n").substr(0, 3000);
}

}  // namespace
}  // namespace rill::worker::loader
