#include "engine/kv_block_negotiation.h"

#include <gtest/gtest.h>

namespace rill::engine {
namespace {

TEST(NegotiateKvBlocks, EveryRankGetsTheSmallestRoom) {
  EXPECT_EQ(*NegotiateKvBlocks({900, 700, 800}, 0, 16, 0), 700);
  EXPECT_EQ(*NegotiateKvBlocks({42}, 0, 16, 0), 42);
}

TEST(NegotiateKvBlocks, FixedCountIsUsedWhenEveryRankFitsIt) {
  EXPECT_EQ(*NegotiateKvBlocks({900, 700}, 64, 16, 0), 64);
  absl::StatusOr<int> n = NegotiateKvBlocks({900, 700}, 800, 16, 0);
  ASSERT_EQ(n.status().code(), absl::StatusCode::kResourceExhausted) << n.status();
  EXPECT_NE(n.status().message().find("worker rank 1's device holds 700 KV blocks"),
            std::string::npos)
      << n.status();
}

TEST(NegotiateKvBlocks, MaxModelLenMustFitOneSequence) {
  EXPECT_EQ(*NegotiateKvBlocks({100, 64}, 0, 16, 1024), 64);  // 64 * 16 = 1024 tokens
  absl::StatusOr<int> n = NegotiateKvBlocks({100, 63}, 0, 16, 1024);
  ASSERT_EQ(n.status().code(), absl::StatusCode::kResourceExhausted) << n.status();
  EXPECT_NE(n.status().message().find("holds only 1008 tokens, fewer than max model length 1024"),
            std::string::npos)
      << n.status();
}

TEST(NegotiateKvBlocks, NoRanksOrNoRoomIsInvalid) {
  EXPECT_EQ(NegotiateKvBlocks({}, 0, 16, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NegotiateKvBlocks({10, 0}, 0, 16, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rill::engine
