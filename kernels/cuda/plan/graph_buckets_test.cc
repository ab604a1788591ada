#include "kernels/cuda/plan/graph_buckets.h"

#include <vector>

#include "gtest/gtest.h"

namespace rill::kernels::cuda {
namespace {

TEST(GraphBucketsTest, DefaultBucketsAreSmallPowersThenMultiplesOfEight) {
  auto b = GraphBuckets::ForMaxBatch(36);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->sizes(), (std::vector<int>{1, 2, 4, 8, 16, 24, 32, 36}));
  EXPECT_EQ(b->max_batch(), 36);
}

TEST(GraphBucketsTest, PadsToNextBucket) {
  auto b = GraphBuckets::ForMaxBatch(256);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b->BucketFor(1), 1);
  EXPECT_EQ(*b->BucketFor(3), 4);
  EXPECT_EQ(*b->BucketFor(5), 8);
  EXPECT_EQ(*b->BucketFor(8), 8);
  EXPECT_EQ(*b->BucketFor(17), 24);
  EXPECT_EQ(*b->BucketFor(255), 256);
  EXPECT_EQ(*b->BucketFor(256), 256);
}

TEST(GraphBucketsTest, TooLargeBatchIsOutOfRange) {
  auto b = GraphBuckets::ForMaxBatch(16);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->BucketFor(17).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(b->BucketFor(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b->BucketFor(-3).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GraphBucketsTest, SmallMaxBatch) {
  EXPECT_EQ(GraphBuckets::ForMaxBatch(1)->sizes(), std::vector<int>{1});
  EXPECT_EQ(GraphBuckets::ForMaxBatch(3)->sizes(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(GraphBuckets::ForMaxBatch(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GraphBucketsTest, ExplicitSizesAreSortedAndDeduplicated) {
  auto b = GraphBuckets::FromSizes({64, 1, 16, 16});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->sizes(), (std::vector<int>{1, 16, 64}));
  EXPECT_EQ(*b->BucketFor(2), 16);
  EXPECT_EQ(GraphBuckets::FromSizes({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GraphBuckets::FromSizes({4, 0}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rill::kernels::cuda
