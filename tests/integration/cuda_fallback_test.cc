// A binary built with CUDA (when the toolkit exists) must run on a machine
// without a GPU and say that it falls back to the CPU backend.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "kernels/cuda/device_probe.h"
#include "tests/util/subprocess.h"

namespace rill {
namespace {

std::string RunAndCapture(const std::string& command, int* exit_code) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST(CudaFallbackTest, AutoBackendFallsBackToCpuWithoutGpu) {
  if (cuda::ProbeCudaDevices().ok()) GTEST_SKIP() << "a GPU is present";
  int code = -1;
  std::string out = RunAndCapture(testing::RunfilePath("cli/rill") + " device-info", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("falling back to the CPU backend"), std::string::npos) << out;
  EXPECT_NE(out.find("backend: cpu"), std::string::npos) << out;
  if (cuda::BuiltWithCuda()) {
    EXPECT_NE(out.find("built with CUDA: yes"), std::string::npos) << out;
  }
}

TEST(CudaFallbackTest, ForcedCudaWithoutGpuIsAClearError) {
  if (cuda::ProbeCudaDevices().ok()) GTEST_SKIP() << "a GPU is present";
  int code = -1;
  std::string out =
      RunAndCapture(testing::RunfilePath("cli/rill") + " device-info --backend=cuda", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("--backend=cuda but"), std::string::npos) << out;
}

TEST(CudaFallbackTest, UnknownBackendIsRejected) {
  int code = -1;
  std::string out =
      RunAndCapture(testing::RunfilePath("cli/rill") + " device-info --backend=tpu", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("unknown backend 'tpu'"), std::string::npos) << out;
}

}  // namespace
}  // namespace rill
