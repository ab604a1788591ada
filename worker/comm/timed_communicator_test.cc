#include "worker/comm/timed_communicator.h"

#include <memory>

#include <gtest/gtest.h>

#include "absl/time/clock.h"

namespace rill::worker {
namespace {

// A rank whose collectives take a known time (as a wait for a slow peer
// would).
class SlowCommunicator : public SingleRankCommunicator {
 public:
  absl::Status AllReduceSum(float*, int64_t) override {
    absl::SleepFor(absl::Milliseconds(20));
    return absl::OkStatus();
  }
  absl::Status Broadcast(void*, int64_t, int) override {
    absl::SleepFor(absl::Milliseconds(10));
    return absl::UnavailableError("peer gone");
  }
};

TEST(TimedCommunicatorTest, AddsUpCollectiveTimeUntilTaken) {
  TimedCommunicator comm(std::make_unique<SlowCommunicator>());
  EXPECT_EQ(comm.TakeElapsed(), absl::ZeroDuration());
  float x = 1;
  ASSERT_TRUE(comm.AllReduceSum(&x, 1).ok());
  ASSERT_TRUE(comm.AllReduceSum(&x, 1).ok());
  // A failed collective still took its time, and its status passes through.
  EXPECT_EQ(comm.Broadcast(&x, sizeof(x), 0).code(), absl::StatusCode::kUnavailable);
  const absl::Duration step = comm.TakeElapsed();
  EXPECT_GE(step, absl::Milliseconds(50));
  EXPECT_LT(step, absl::Seconds(5));
  EXPECT_EQ(comm.TakeElapsed(), absl::ZeroDuration());
  EXPECT_EQ(comm.world_size(), 1);
  EXPECT_STREQ(comm.backend(), "none");
}

}  // namespace
}  // namespace rill::worker
