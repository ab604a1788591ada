// What --help lists: the flags of the named files and the named flags,
// grouped by file, and nothing else linked into the binary.
#include "base/flags_usage.h"

#include <string>

#include <gtest/gtest.h>

#include "absl/flags/flag.h"

ABSL_FLAG(int, flags_usage_test_width, 3, "How wide, in cells.");

namespace rill::base {
namespace {

TEST(FlagsUsageTest, ListsTheFlagsOfTheNamedFilesOnly) {
  const std::string text = FlagsHelpText({"usage line", {"base/flags_usage_test.cc"}, {}});
  EXPECT_EQ(text.rfind("usage line\n", 0), 0u) << text;
  EXPECT_NE(text.find("Flags from base/flags_usage_test.cc:\n"
                      "  --flags_usage_test_width (default: 3)\n      How wide, in cells.\n"),
            std::string::npos)
      << text;
  // gtest's and absl's own flags are linked in too, from other files.
  EXPECT_EQ(text.find("--flagfile"), std::string::npos) << text;
}

TEST(FlagsUsageTest, NamedFlagsAreListedWhereverDefined) {
  const std::string text = FlagsHelpText({"u", {}, {"flags_usage_test_width"}});
  EXPECT_NE(text.find("Shared flags:\n  --flags_usage_test_width (default: 3)"), std::string::npos)
      << text;
}

TEST(FlagsUsageTest, NoMatchingFlagSaysSo) {
  EXPECT_NE(FlagsHelpText({"u", {"no/such_file.cc"}, {}}).find("(no flags)"), std::string::npos);
}

}  // namespace
}  // namespace rill::base
