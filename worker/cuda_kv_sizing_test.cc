#include "worker/cuda_kv_sizing.h"

#include <gtest/gtest.h>

namespace rill::worker {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

loader::ModelConfig Config() {
  loader::ModelConfig c;
  c.num_layers = 30;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  return c;
}

PlacedModelMemory Memory() {
  PlacedModelMemory m;
  m.total = 1024 * kMiB;
  m.free_before = 1000 * kMiB;
  m.free_after = 700 * kMiB;  // 300 MiB placed: 250 weights, 50 activations
  m.weight_bytes = 250 * kMiB;
  return m;
}

// budget 0.9 * 1024 MiB = 921.6 MiB; fixed: 24 others + 250 + 50 + 256
// reserve = 580 MiB; a block of 16 tokens is 2 * 30 * 16 * kv_heads * 64 * 2 bytes.
TEST(SizeCudaKvCache, KeepsOneBlockForTheGraphsPaddingRows) {
  absl::StatusOr<CudaKvSizing> s = SizeCudaKvCache(Config(), 3, 16, 0.9, 0, Memory());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->activation_bytes, 50 * kMiB);
  EXPECT_EQ(s->plan.bytes_per_block, 2 * 30 * 16 * 3 * 64 * 2);
  const int64_t free_for_kv = static_cast<int64_t>(0.9 * 1024 * kMiB) - 580 * kMiB;
  EXPECT_EQ(s->plan.num_blocks, free_for_kv / s->plan.bytes_per_block);
  EXPECT_EQ(s->num_blocks, s->plan.num_blocks - 1);
}

// A tensor-parallel rank holding one of the three K/V heads fits three
// times the blocks.
TEST(SizeCudaKvCache, FewerHeadsPerRankFitMoreBlocks) {
  absl::StatusOr<CudaKvSizing> all = SizeCudaKvCache(Config(), 3, 16, 0.9, 0, Memory());
  absl::StatusOr<CudaKvSizing> one = SizeCudaKvCache(Config(), 1, 16, 0.9, 0, Memory());
  ASSERT_TRUE(all.ok() && one.ok());
  EXPECT_NEAR(one->plan.num_blocks, 3 * all->plan.num_blocks, 3);
}

TEST(SizeCudaKvCache, ModelThatDoesNotFitOrTooShortACacheIsResourceExhausted) {
  PlacedModelMemory m = Memory();
  m.weight_bytes = 900 * kMiB;
  EXPECT_EQ(SizeCudaKvCache(Config(), 3, 16, 0.9, 0, m).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(SizeCudaKvCache(Config(), 3, 16, 0.9, int64_t{1} << 30, Memory()).status().code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace rill::worker
