#include "kernels/cuda/plan/kv_memory_plan.h"

#include "gtest/gtest.h"

namespace rill::kernels::cuda {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kGiB = 1ll << 30;

KvCacheShape SmolLm2() { return {/*layers=*/30, /*kv_heads=*/3, /*head_dim=*/64, /*block=*/16, 2}; }

TEST(KvMemoryPlanTest, BytesPerBlockCountsKAndVForAllLayers) {
  EXPECT_EQ(KvBytesPerBlock(SmolLm2()), 2 * 30 * 16 * 3 * 64 * 2);
}

TEST(KvMemoryPlanTest, UsesWhatIsLeftOfTheBudget) {
  MemoryPlanInput in;
  in.total_bytes = 100 * kGiB;
  in.free_bytes = 99 * kGiB;  // 1 GiB held by another process
  in.weight_bytes = 2 * kGiB;
  in.activation_bytes = 1 * kGiB;
  in.reserve_bytes = 0;
  in.gpu_memory_utilization = 0.5;
  auto plan = PlanKvCache(SmolLm2(), in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t left = 50 * kGiB - 1 * kGiB - 2 * kGiB - 1 * kGiB;
  EXPECT_EQ(plan->budget_bytes, 50 * kGiB);
  EXPECT_EQ(plan->num_blocks, left / KvBytesPerBlock(SmolLm2()));
  EXPECT_EQ(plan->kv_bytes, plan->num_blocks * plan->bytes_per_block);
  EXPECT_LE(plan->kv_bytes, left);
  EXPECT_GT(plan->kv_bytes, left - plan->bytes_per_block);
  EXPECT_EQ(plan->max_cached_tokens, plan->num_blocks * 16);
}

TEST(KvMemoryPlanTest, HigherUtilizationGivesMoreBlocks) {
  MemoryPlanInput in;
  in.total_bytes = in.free_bytes = 80 * kGiB;
  in.weight_bytes = 1 * kGiB;
  in.gpu_memory_utilization = 0.5;
  auto low = PlanKvCache(SmolLm2(), in);
  in.gpu_memory_utilization = 0.9;
  auto high = PlanKvCache(SmolLm2(), in);
  ASSERT_TRUE(low.ok() && high.ok());
  EXPECT_GT(high->num_blocks, low->num_blocks);
}

TEST(KvMemoryPlanTest, WeightsThatDoNotFitAreAClearError) {
  MemoryPlanInput in;
  in.total_bytes = in.free_bytes = 8 * kGiB;
  in.weight_bytes = 16 * kGiB;
  auto plan = PlanKvCache(SmolLm2(), in);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("does not fit"), std::string::npos);
  EXPECT_NE(plan.status().message().find("--gpu-memory-utilization=0.9"), std::string::npos);
  EXPECT_NE(plan.status().message().find("16384.0 MiB"), std::string::npos) << plan.status();
}

TEST(KvMemoryPlanTest, OtherProcessesCountAgainstTheBudget) {
  MemoryPlanInput in;
  in.total_bytes = 10 * kGiB;
  in.free_bytes = 2 * kGiB;  // 8 GiB used elsewhere; budget 9 GiB
  in.weight_bytes = 2 * kGiB;
  EXPECT_EQ(PlanKvCache(SmolLm2(), in).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(KvMemoryPlanTest, MaxModelLenMustFit) {
  MemoryPlanInput in;
  in.total_bytes = in.free_bytes = 1 * kGiB;
  in.reserve_bytes = 0;
  in.gpu_memory_utilization = 1.0;
  in.weight_bytes = kGiB - 10 * KvBytesPerBlock(SmolLm2());  // room for 10 blocks = 160 tokens
  in.max_model_len = 160;
  auto ok = PlanKvCache(SmolLm2(), in);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->num_blocks, 10);
  in.max_model_len = 161;
  auto plan = PlanKvCache(SmolLm2(), in);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("160 tokens"), std::string::npos) << plan.status();
}

TEST(KvMemoryPlanTest, NoRoomForOneBlock) {
  MemoryPlanInput in;
  in.total_bytes = in.free_bytes = 1 * kGiB;
  in.reserve_bytes = 0;
  in.gpu_memory_utilization = 1.0;
  in.weight_bytes = kGiB - KvBytesPerBlock(SmolLm2()) / 2;
  EXPECT_EQ(PlanKvCache(SmolLm2(), in).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(KvMemoryPlanTest, BadInputsAreInvalidArgument) {
  MemoryPlanInput in;
  in.total_bytes = in.free_bytes = 8 * kGiB;
  for (double u : {0.0, -0.1, 1.5}) {
    in.gpu_memory_utilization = u;
    EXPECT_EQ(PlanKvCache(SmolLm2(), in).status().code(), absl::StatusCode::kInvalidArgument) << u;
  }
  in.gpu_memory_utilization = 0.9;
  in.free_bytes = 9 * kGiB;
  EXPECT_EQ(PlanKvCache(SmolLm2(), in).status().code(), absl::StatusCode::kInvalidArgument);
  in.free_bytes = 8 * kGiB;
  KvCacheShape bad = SmolLm2();
  bad.head_dim = 0;
  EXPECT_EQ(PlanKvCache(bad, in).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kMiB, 1 << 20);
}

}  // namespace
}  // namespace rill::kernels::cuda
