// rill-engine with CUDA tensor-parallel ranks on a machine without a GPU:
// the engine process itself needs none (it makes the NCCL id and spawns the
// rill-worker ranks), each rank finds no device, and the engine exits 2
// promptly with a short reason naming the rank, in its log and in its
// termination message (what `kubectl describe pod` shows). Skipped where a
// CUDA device is usable.
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/secret_file.h"
#include "kernels/cuda/device_probe.h"
#include "tests/util/subprocess.h"

namespace rill::engine::service {
namespace {

std::string ReadAll(const std::string& path) {
  std::string text;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  return text;
}

void ExpectPromptExitNamingTheRank(const std::string& name, std::vector<std::string> flags) {
  if (kernels::cuda::ProbeCudaDevices().ok()) GTEST_SKIP() << "a CUDA device is present";
  const std::string dir = tests::util::TestTempDir();
  const std::string secret = absl::StrCat(dir, "/secret_", name);
  const std::string log = absl::StrCat(dir, "/engine_", name, ".log");
  const std::string reason_file = absl::StrCat(dir, "/termination_", name);
  std::remove(reason_file.c_str());
  ASSERT_TRUE(base::WriteSecretFile(secret, "cuda-ranks-process-test").ok());
  std::vector<std::string> argv = {
      tests::util::RunfilePath("engine/service/rill-engine"),
      "--host=127.0.0.1",
      "--port=0",
      "--backend=cuda",
      absl::StrCat("--engine_secret_file=", secret),
      absl::StrCat("--termination_message_path=", reason_file),
      absl::StrCat("--worker_binary=", tests::util::RunfilePath("worker/rill-worker"))};
  argv.insert(argv.end(), flags.begin(), flags.end());
  tests::util::Subprocess child;
  ASSERT_TRUE(child.Start(argv, log).ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<int> code = child.Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << "rill-engine did not exit: " << code.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(*code, 2) << ReadAll(log);
  const std::string reason = ReadAll(reason_file);
  EXPECT_NE(reason.find("worker rank "), std::string::npos) << reason;
  EXPECT_NE(reason.find("failed to start: the CUDA backend needs a CUDA device"),
            std::string::npos)
      << reason;
  EXPECT_LT(reason.size(), 400u) << reason;
  EXPECT_NE(ReadAll(log).find("worker rank "), std::string::npos);
}

TEST(EngineCudaRanksProcessTest, TwoRanksWithoutAGpuExitPromptlyNamingTheRank) {
  ExpectPromptExitNamingTheRank("tp2", {"--tensor_parallel_size=2"});
}

TEST(EngineCudaRanksProcessTest, OneRankInAWorkerWithoutAGpuExitsPromptlyNamingTheRank) {
  ExpectPromptExitNamingTheRank("mp1", {"--distributed_executor_backend=mp"});
}

}  // namespace
}  // namespace rill::engine::service
