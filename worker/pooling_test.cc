#include "worker/pooling.h"

#include <cmath>

#include "gtest/gtest.h"

namespace rill::worker {
namespace {

// Two tokens of width 3.
const float kHidden[] = {1, 2, 2, 3, 2, 0};

TEST(PoolingTest, MeanClsLastUnnormalized) {
  PoolingSpec spec;
  spec.normalize = false;
  EXPECT_EQ(*Pool(kHidden, 2, 3, spec), (std::vector<float>{2, 2, 1}));
  spec.type = PoolingType::kCls;
  EXPECT_EQ(*Pool(kHidden, 2, 3, spec), (std::vector<float>{1, 2, 2}));
  spec.type = PoolingType::kLast;
  EXPECT_EQ(*Pool(kHidden, 2, 3, spec), (std::vector<float>{3, 2, 0}));
}

TEST(PoolingTest, NormalizeAfterTruncation) {
  PoolingSpec spec;
  spec.type = PoolingType::kCls;
  std::vector<float> full = *Pool(kHidden, 2, 3, spec);
  EXPECT_NEAR(full[0], 1.0 / 3, 1e-7);
  EXPECT_NEAR(full[2], 2.0 / 3, 1e-7);
  spec.dimensions = 1;
  EXPECT_EQ(*Pool(kHidden, 2, 3, spec), (std::vector<float>{1}));
}

TEST(PoolingTest, BadInput) {
  PoolingSpec spec;
  EXPECT_EQ(Pool(kHidden, 0, 3, spec).status().code(), absl::StatusCode::kInvalidArgument);
  spec.dimensions = 4;
  EXPECT_EQ(Pool(kHidden, 2, 3, spec).status().code(), absl::StatusCode::kInvalidArgument);
  spec.dimensions = -1;
  EXPECT_EQ(Pool(kHidden, 2, 3, spec).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rill::worker
