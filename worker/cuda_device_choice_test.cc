#include "worker/cuda_device_choice.h"

#include <gtest/gtest.h>

namespace rill::worker {
namespace {

CudaDeviceRequest Request(int rank, int visible) {
  CudaDeviceRequest r;
  r.rank = rank;
  r.visible_devices = visible;
  return r;
}

TEST(ChooseCudaDevice, RankNumbersTheDeviceOnAMachineWithSeveral) {
  EXPECT_EQ(*ChooseCudaDevice(Request(0, 4)), 0);
  EXPECT_EQ(*ChooseCudaDevice(Request(3, 4)), 3);
}

// A Kubernetes worker container of rank 1 sees its one GPU as device 0.
TEST(ChooseCudaDevice, OneVisibleDeviceIsEveryRanksDevice) {
  EXPECT_EQ(*ChooseCudaDevice(Request(1, 1)), 0);
}

TEST(ChooseCudaDevice, EngineListThenWorkerFlagWin) {
  CudaDeviceRequest r = Request(1, 4);
  r.engine_devices = {2, 3};
  EXPECT_EQ(*ChooseCudaDevice(r), 3);
  r.worker_flag = 0;
  EXPECT_EQ(*ChooseCudaDevice(r), 0);
}

TEST(ChooseCudaDevice, InvisibleDeviceNamesTheRankAndWhatItSees) {
  CudaDeviceRequest r = Request(1, 2);
  r.engine_devices = {0, 5};
  r.cuda_visible_devices = "0,1";
  absl::StatusOr<int> d = ChooseCudaDevice(r);
  ASSERT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition) << d.status();
  EXPECT_EQ(d.status().message(),
            "CUDA device 5 (the engine's device for this rank) is not visible: this process "
            "sees 2 devices (CUDA_VISIBLE_DEVICES=0,1)");
  r = Request(2, 0);
  EXPECT_EQ(ChooseCudaDevice(r).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ChooseCudaDevice, EngineListWithoutThisRankIsInvalid) {
  CudaDeviceRequest r = Request(2, 4);
  r.engine_devices = {0, 1};
  EXPECT_EQ(ChooseCudaDevice(r).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rill::worker
