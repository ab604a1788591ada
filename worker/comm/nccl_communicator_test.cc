// What can be checked without a GPU: ids, argument checks, and a clear
// error (not a hang or crash) when the rank's device cannot be used. The
// all-reduce itself runs in the device check (tools/gpu_check.sh).
#include "worker/comm/nccl_communicator.h"

#include <chrono>

#include <gtest/gtest.h>

#include "kernels/cuda/device_probe.h"

namespace rill::worker {
namespace {

bool HaveNccl() { return kernels::cuda::BuiltWithCuda(); }

TEST(NcclCommunicatorTest, UniqueIdsAreFreshAndFullSize) {
  absl::StatusOr<std::string> a = NewNcclUniqueId();
  if (!HaveNccl()) {
    EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition) << a.status();
    EXPECT_EQ(NcclVersionString(), "none");
    return;
  }
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::string> b = NewNcclUniqueId();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->size(), 128u);
  EXPECT_EQ(b->size(), 128u);
  EXPECT_NE(*a, *b);
  EXPECT_NE(NcclVersionString(), "none");
  EXPECT_EQ(NcclVersionString().front(), '2') << NcclVersionString();
}

TEST(NcclCommunicatorTest, RejectsMalformedOptions) {
  NcclOptions o;
  o.unique_id = "short";
  EXPECT_EQ(CreateNcclCommunicator(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.unique_id = std::string(128, 'x');
  o.rank = 2;
  o.world_size = 2;
  absl::Status s = CreateNcclCommunicator(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("rank 2 out of a world of 2"), std::string::npos) << s;
  o.rank = 0;
  o.world_size = 0;
  EXPECT_EQ(CreateNcclCommunicator(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.world_size = 1;
  o.device = -1;
  EXPECT_EQ(CreateNcclCommunicator(o).status().code(), absl::StatusCode::kInvalidArgument);
}

// Without a usable device a rank fails at once with FailedPrecondition and
// the device in the message, instead of waiting for peers.
TEST(NcclCommunicatorTest, NoDeviceIsAClearErrorNotAHang) {
  if (HaveNccl() && kernels::cuda::ProbeCudaDevices().ok()) {
    GTEST_SKIP() << "a CUDA device is present: the device check covers this path";
  }
  NcclOptions o;
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  o.unique_id = id.ok() ? *id : std::string(128, '\0');
  o.world_size = 2;
  o.rank = 1;
  o.device = 0;
  o.timeout = std::chrono::seconds(30);
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = CreateNcclCommunicator(o).status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("rank 1 of 2 joining NCCL on device 0"), std::string::npos) << s;
}

}  // namespace
}  // namespace rill::worker
