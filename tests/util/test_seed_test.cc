#include "tests/util/test_seed.h"

#include <string>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"

namespace rill::tests::util {
namespace {

// Runs test_seed_print with `env` (shell assignments) in a fresh process.
CommandResult RunPrinter(const std::string& env) {
  return RunCommand(
      absl::StrCat("env ", env, " ", ShellQuote(RunfilePath("tests/util/test_seed_print"))));
}

// The "key=value" line the printer writes to stdout.
std::string PrintedLine(const CommandResult& r) {
  const size_t at = r.output.find("seed=");
  if (at == std::string::npos) return "";
  return r.output.substr(at, r.output.find('\n', at) - at);
}

TEST(TestSeedTest, StreamsAreFixedPerSeedAndDistinct) {
  EXPECT_EQ(TestSeed(), TestSeed());
  EXPECT_EQ(StreamSeed(3), StreamSeed(3));
  EXPECT_NE(StreamSeed(0), StreamSeed(1));
  std::mt19937_64 a = TestRng(5);
  std::mt19937_64 b = TestRng(5);
  EXPECT_EQ(a(), b());
}

TEST(TestSeedTest, EnvironmentSetsTheSeed) {
  const CommandResult first = RunPrinter("RILL_TEST_SEED=123");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("test seed 123 (from RILL_TEST_SEED)"), std::string::npos)
      << first.output;
  EXPECT_EQ(PrintedLine(first).rfind("seed=123 ", 0), 0u) << first.output;

  const CommandResult second = RunPrinter("RILL_TEST_SEED=123");
  EXPECT_EQ(PrintedLine(second), PrintedLine(first));

  const CommandResult other = RunPrinter("RILL_TEST_SEED=124");
  EXPECT_NE(PrintedLine(other), PrintedLine(first));
}

TEST(TestSeedTest, PrintedDrawnSeedReplays) {
  const CommandResult drawn = RunPrinter("-u RILL_TEST_SEED");
  ASSERT_EQ(drawn.exit_code, 0) << drawn.output;
  const std::string prefix = "test seed ";
  const size_t at = drawn.output.find(prefix);
  ASSERT_NE(at, std::string::npos) << drawn.output;
  const size_t start = at + prefix.size();
  uint64_t seed = 0;
  ASSERT_TRUE(absl::SimpleAtoi(drawn.output.substr(start, drawn.output.find(' ', start) - start),
                               &seed))
      << drawn.output;

  const CommandResult replay = RunPrinter(absl::StrCat("RILL_TEST_SEED=", seed));
  ASSERT_EQ(replay.exit_code, 0) << replay.output;
  EXPECT_EQ(PrintedLine(replay), PrintedLine(drawn));
}

TEST(TestSeedTest, MalformedSeedFailsLoudly) {
  const CommandResult r = RunPrinter("RILL_TEST_SEED=12x");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("RILL_TEST_SEED='12x' is not an unsigned 64-bit integer"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace rill::tests::util
