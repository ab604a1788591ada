// The engine options' one declaration, seen from both ends: flags parsed
// into EngineArgs, the checks naming the flag, and what a launcher passes on.
#include "engine/engine_flags.h"

#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "engine/engine_args.h"

namespace rill::engine {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

void Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "engine_flags_test");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  absl::ParseCommandLine(argv.size(), argv.data());
}

TEST(EngineFlagsTest, ParsedFlagsFillEngineArgs) {
  absl::FlagSaver restore;
  Parse({"--kv_cache_mb=256", "--backend=cpu", "--max_num_seqs=8",
         "--external_workers_dir=/run/rill", "--log_stats_interval=10s",
         "--lora=a=/adapters/a,b=/adapters/b", "--enable_prefix_caching=false"});
  const EngineArgs args = EngineArgsFromFlags();
  EXPECT_EQ(args.kv_cache_mb, 256);
  EXPECT_EQ(args.backend, "cpu");
  EXPECT_EQ(args.max_num_seqs, 8);
  EXPECT_EQ(args.external_workers_dir, "/run/rill");
  EXPECT_EQ(args.log_stats_interval, absl::Seconds(10));
  EXPECT_FALSE(args.enable_prefix_caching);
  ASSERT_EQ(args.lora.adapters.size(), 2u);
  EXPECT_EQ(args.lora.adapters[1], std::make_pair(std::string("b"), std::string("/adapters/b")));
  // Untouched options keep the declared defaults, the same as EngineArgs{}.
  EXPECT_EQ(args.model, EngineArgs().model);
  EXPECT_EQ(args.max_num_batched_tokens, 2048);
  EXPECT_TRUE(ValidateEngineArgs(args).ok()) << ValidateEngineArgs(args);
}

TEST(EngineFlagsTest, OnlyChangedFlagsArePassedOn) {
  absl::FlagSaver restore;
  EXPECT_TRUE(EngineFlagsChangedFromDefault().empty());
  Parse({"--kv_cache_mb=256", "--model=default", "--lora=x=/p"});
  const std::vector<std::string> changed = EngineFlagsChangedFromDefault();
  EXPECT_THAT(changed, Contains("--kv_cache_mb=256"));
  EXPECT_THAT(changed, Contains("--lora=x=/p"));
  EXPECT_THAT(changed, Not(Contains(HasSubstr("--model"))));  // Given, but the default.
  EXPECT_EQ(changed.size(), 2u);
}

TEST(EngineFlagsTest, ChecksNameTheFlag) {
  struct Case {
    void (*set)(EngineArgs*);
    std::string message;
  };
  const Case cases[] = {
      {[](EngineArgs* a) { a->max_num_seqs = 0; }, "--max_num_seqs must be at least 1, got 0"},
      {[](EngineArgs* a) { a->tensor_parallel_size = -1; }, "--tensor_parallel_size"},
      {[](EngineArgs* a) { a->kv_cache_mb = 0; }, "--kv_cache_mb"},
      {[](EngineArgs* a) { a->gpu_memory_utilization = 1.5; },
       "--gpu_memory_utilization must be in (0, 1], got 1.5"},
      {[](EngineArgs* a) { a->backend = "tpu"; }, "unknown backend 'tpu'"},
      {[](EngineArgs* a) { a->matmul = "fast"; }, "--matmul"},
  };
  for (const Case& c : cases) {
    EngineArgs args;
    c.set(&args);
    const absl::Status s = ValidateEngineArgs(args);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
}

TEST(EngineFlagsTest, MalformedLoraIsRefusedWhileParsing) {
  LoraAdapters loras;
  std::string error;
  EXPECT_FALSE(absl::ParseFlag("a=/x,nopath", &loras, &error));
  EXPECT_THAT(error, HasSubstr("--lora wants name=path, got 'nopath'"));
  ASSERT_TRUE(absl::ParseFlag("a=/x,b=/y", &loras, &error)) << error;
  EXPECT_EQ(absl::UnparseFlag(loras), "a=/x,b=/y");
}

TEST(EngineFlagsTest, ConfigReportsEveryOptionByItsFlagName) {
  EngineArgs args;
  args.kv_cache_mb = 256;
  const auto values = EngineOptionValues(args);
  EXPECT_THAT(values, Contains(Pair("kv_cache_mb", "256")));
  EXPECT_THAT(values, Contains(Pair("backend", "auto")));
  // Each reported name is a flag of the binaries that take engine options.
  for (const auto& [name, value] : values) {
    EXPECT_NE(absl::FindCommandLineFlag(name), nullptr) << name;
  }
}

}  // namespace
}  // namespace rill::engine
