#include "kernels/cuda/device_probe.h"

#include <gtest/gtest.h>

#include "absl/status/status.h"

namespace rill::kernels::cuda {
namespace {

// Without a usable GPU the probe must fail cleanly with a reason, never crash.
TEST(DeviceProbeTest, ReportsMissingDeviceAsUnavailable) {
  absl::StatusOr<std::vector<CudaDeviceInfo>> devices = ProbeCudaDevices();
  if (devices.ok()) GTEST_SKIP() << "a CUDA device is present: " << (*devices)[0].name;
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(devices.status().message().empty());
}

TEST(DeviceProbeTest, VectorAddKernelRunsOnEveryDevice) {
  absl::StatusOr<std::vector<CudaDeviceInfo>> devices = ProbeCudaDevices();
  if (!devices.ok()) GTEST_SKIP() << "needs a GPU: " << devices.status();
  for (const CudaDeviceInfo& d : *devices) {
    EXPECT_GE(d.compute_major, 8) << d.name;
    EXPECT_TRUE(RunDeviceSelfTest(d.index).ok()) << d.name;
  }
}

TEST(DeviceProbeTest, LinkedLibrariesAreReported) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA";
  EXPECT_NE(LinkedLibraryVersions().find("nccl"), std::string::npos);
}

}  // namespace
}  // namespace rill::kernels::cuda
