#include "tests/util/tiny_models.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"

namespace rill::tests::util {

void MakeTinyModels(const std::string& dir, uint32_t seed) {
  absl::StatusOr<CommandResult> r = RunPython("tests/reference/make_tiny_models.py",
                                              {"--out", dir, "--seed", absl::StrCat(seed)});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->output;
}

std::string TinyModelsDir() { return absl::StrCat(TestTempDir(), "/tiny"); }

std::string TinyModelTestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

}  // namespace rill::tests::util
