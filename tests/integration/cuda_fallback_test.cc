// A binary built with CUDA (when the toolkit exists) must run on a machine
// without a GPU and say that it falls back to the CPU backend.
#include <sys/stat.h>

#include <string>

#include <gtest/gtest.h>

#include "engine/model_path.h"

#include "kernels/cuda/device_probe.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"

namespace rill::tests::integration {
namespace {

// Runs `rill device-info <flags>`; returns its combined output.
std::string DeviceInfo(const std::string& flags, int* exit_code) {
  util::CommandResult r = util::RunCommand(util::RunfilePath("cli/rill") + " device-info" + flags);
  *exit_code = r.exit_code;
  return r.output;
}

TEST(CudaFallbackTest, AutoBackendFallsBackToCpuWithoutGpu) {
  if (kernels::cuda::ProbeCudaDevices().ok()) GTEST_SKIP() << "a GPU is present";
  int code = -1;
  std::string out = DeviceInfo("", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("falling back to the CPU backend"), std::string::npos) << out;
  EXPECT_NE(out.find("backend: cpu"), std::string::npos) << out;
  if (kernels::cuda::BuiltWithCuda()) {
    EXPECT_NE(out.find("built with CUDA: yes"), std::string::npos) << out;
  }
}

// A machine without a GPU is normal: device-info says why it uses the CPU
// once (not again as a logged warning), and without a driver it says so
// instead of the runtime's "CUDA driver version is insufficient".
TEST(CudaFallbackTest, CpuOnlyMachineIsReportedOnceWithoutADriverWarning) {
  if (kernels::cuda::ProbeCudaDevices().ok()) GTEST_SKIP() << "a GPU is present";
  int code = -1;
  std::string out = DeviceInfo("", &code);
  EXPECT_EQ(code, 0) << out;
  size_t first = out.find("falling back to the CPU backend");
  ASSERT_NE(first, std::string::npos) << out;
  EXPECT_EQ(out.find("falling back to the CPU backend", first + 1), std::string::npos) << out;
  if (!kernels::cuda::NvidiaDriverPresent()) {
    EXPECT_EQ(out.find("driver version is insufficient"), std::string::npos) << out;
    if (kernels::cuda::BuiltWithCuda())
      EXPECT_NE(out.find("no NVIDIA driver"), std::string::npos) << out;
  }
}

TEST(CudaFallbackTest, ForcedCudaWithoutGpuIsAClearError) {
  if (kernels::cuda::ProbeCudaDevices().ok()) GTEST_SKIP() << "a GPU is present";
  int code = -1;
  std::string out =
      DeviceInfo(" --backend=cuda", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("cuda requested but"), std::string::npos) << out;
}

TEST(CudaFallbackTest, UnknownBackendIsRejected) {
  int code = -1;
  std::string out =
      DeviceInfo(" --backend=tpu", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("unknown backend 'tpu'"), std::string::npos) << out;
}

// The offline commands run the CPU model in-process: auto means the CPU on
// any machine (a GPU box included), an explicit cuda says where the GPU is
// used instead, and an unknown name is refused. (`generate`: `tokenize`
// loads no model, so it has no backend to choose.)
TEST(CudaFallbackTest, OfflineCommandsRunOnTheCpuUnderAuto) {
  struct stat st;
  if (stat(engine::ResolveModelPath("default").c_str(), &st) != 0) {
    GTEST_SKIP() << "default model absent";
  }
  const std::string generate =
      util::RunfilePath("cli/rill") + " generate --prompt=Hello --max_tokens=1 --threads=1";
  util::CommandResult r = util::RunCommand(generate + " --backend=auto");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = util::RunCommand(generate + " --backend=cuda");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("rill serve --backend=cuda"), std::string::npos) << r.output;
  r = util::RunCommand(generate + " --backend=tpu");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("unknown backend 'tpu'"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace rill::tests::integration
