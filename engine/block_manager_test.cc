#include "engine/block_manager.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "absl/types/span.h"

namespace rill::engine {
namespace {

std::vector<int32_t> Iota(int n, int32_t start = 100) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(BlockManagerTest, AllocateAndFree) {
  BlockManager bm(8, 4, /*enable_prefix_caching=*/false);
  EXPECT_EQ(bm.num_free_blocks(), 8);
  ASSERT_TRUE(bm.Allocate(1, 9));  // 3 blocks.
  EXPECT_EQ(bm.BlockTable(1).size(), 3u);
  EXPECT_EQ(bm.num_free_blocks(), 5);
  EXPECT_DOUBLE_EQ(bm.Usage(), 3.0 / 8);
  ASSERT_TRUE(bm.Allocate(1, 12));  // Still 3.
  EXPECT_EQ(bm.BlockTable(1).size(), 3u);
  ASSERT_TRUE(bm.Allocate(1, 13));
  EXPECT_EQ(bm.BlockTable(1).size(), 4u);
  // Too many: nothing changes.
  EXPECT_FALSE(bm.Allocate(2, 17));
  EXPECT_FALSE(bm.HasSequence(2) && !bm.BlockTable(2).empty());
  EXPECT_EQ(bm.num_free_blocks(), 4);
  ASSERT_TRUE(bm.Allocate(2, 16));
  EXPECT_EQ(bm.num_free_blocks(), 0);
  // Blocks are distinct across sequences.
  std::vector<int32_t> all = bm.BlockTable(1);
  all.insert(all.end(), bm.BlockTable(2).begin(), bm.BlockTable(2).end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::unique(all.begin(), all.end()), all.end());
  for (int32_t b : bm.BlockTable(1)) EXPECT_EQ(bm.ref_count(b), 1);
  bm.Free(1);
  EXPECT_EQ(bm.num_free_blocks(), 4);
  bm.Free(2);
  EXPECT_EQ(bm.num_free_blocks(), 8);
  EXPECT_DOUBLE_EQ(bm.Usage(), 0.0);
  bm.Free(3);  // Unknown: no-op.
  EXPECT_TRUE(bm.BlockTable(3).empty());
}

// Speculative decoding's rollback: blocks past the kept tokens go back to
// the free queue, in front (taken first), and cached blocks stay.
TEST(BlockManagerTest, TruncateFreesTrailingBlocksOnly) {
  BlockManager bm(8, 4, /*enable_prefix_caching=*/true);
  const std::vector<int32_t> tokens = Iota(9);
  ASSERT_TRUE(bm.Allocate(1, 9 + 6));  // 4 blocks: 9 tokens + 6 draft positions.
  bm.CacheFullBlocks(1, tokens, 9, 0);  // Blocks 0 and 1 cached.
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  const std::vector<int32_t> table = bm.BlockTable(1);
  bm.Truncate(1, 10);  // Keeps 3 blocks.
  EXPECT_EQ(bm.BlockTable(1), std::vector<int32_t>(table.begin(), table.begin() + 3));
  EXPECT_EQ(bm.num_free_blocks(), 5);
  EXPECT_EQ(bm.ref_count(table[3]), 0);
  bm.Truncate(1, 12);  // Already that short.
  EXPECT_EQ(bm.BlockTable(1).size(), 3u);
  // The freed block is the next one handed out.
  ASSERT_TRUE(bm.Allocate(2, 1));
  EXPECT_EQ(bm.BlockTable(2)[0], table[3]);
  bm.Truncate(7, 0);  // Unknown sequence: no-op.
  bm.Free(1);
  bm.Free(2);
  EXPECT_EQ(bm.num_free_blocks(), 8);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
}

TEST(BlockManagerTest, PrefixHitSharesBlocksAndCountsRefs) {
  BlockManager bm(16, 4, true);
  const std::vector<int32_t> prompt = Iota(10);  // 2 full blocks + 2 tokens.
  EXPECT_TRUE(bm.FindCachedPrefix(prompt, 0).empty());
  ASSERT_TRUE(bm.Allocate(1, 10));
  // Not cached until the step that computed them is done.
  EXPECT_TRUE(bm.FindCachedPrefix(prompt, 0).empty());
  bm.CacheFullBlocks(1, prompt, 10, 0);
  EXPECT_EQ(bm.num_cached_blocks(), 2);

  std::vector<int32_t> hit = bm.FindCachedPrefix(prompt, 0);
  ASSERT_EQ(hit.size(), 2u);
  EXPECT_EQ(hit[0], bm.BlockTable(1)[0]);
  EXPECT_EQ(hit[1], bm.BlockTable(1)[1]);
  ASSERT_TRUE(bm.Allocate(2, 10, hit));
  EXPECT_EQ(bm.ref_count(hit[0]), 2);
  EXPECT_EQ(bm.ref_count(hit[1]), 2);
  EXPECT_NE(bm.BlockTable(2)[2], bm.BlockTable(1)[2]);
  EXPECT_EQ(bm.num_free_blocks(), 16 - 4);

  // Partial hit: same first block, different second.
  std::vector<int32_t> other = prompt;
  other[5] = 7;
  EXPECT_EQ(bm.FindCachedPrefix(other, 0).size(), 1u);
  // Every token of a block counts, the last one included.
  for (int pos : {0, 3, 4, 7}) {
    std::vector<int32_t> changed = prompt;
    changed[pos] = 5;
    EXPECT_EQ(bm.FindCachedPrefix(changed, 0).size(), static_cast<size_t>(pos / 4)) << pos;
  }
  // A different extra key (LoRA adapter) shares nothing.
  EXPECT_TRUE(bm.FindCachedPrefix(prompt, 42).empty());
  // Never the last token: an exactly-8-token prompt reuses only 1 block.
  EXPECT_EQ(bm.FindCachedPrefix(Iota(8), 0).size(), 1u);
  EXPECT_EQ(bm.FindCachedPrefix(Iota(9), 0).size(), 2u);

  bm.Free(1);
  EXPECT_EQ(bm.ref_count(hit[0]), 1);
  bm.Free(2);
  EXPECT_EQ(bm.ref_count(hit[0]), 0);
  EXPECT_EQ(bm.num_free_blocks(), 16);
  // Freed cached blocks stay reusable.
  EXPECT_EQ(bm.FindCachedPrefix(prompt, 0), hit);
  ASSERT_TRUE(bm.Allocate(3, 10, hit));
  EXPECT_EQ(bm.ref_count(hit[0]), 1);
  EXPECT_EQ(bm.num_free_blocks(), 13);
}

TEST(BlockManagerTest, AllocateCountsFreeCachedPrefixBlocks) {
  BlockManager bm(4, 4, true);
  const std::vector<int32_t> prompt = Iota(9);
  ASSERT_TRUE(bm.Allocate(1, 9));
  bm.CacheFullBlocks(1, prompt, 9, 0);
  bm.Free(1);
  std::vector<int32_t> hit = bm.FindCachedPrefix(prompt, 0);
  ASSERT_EQ(hit.size(), 2u);
  // 2 reused (free) + 3 new = 5 > 4 blocks.
  EXPECT_FALSE(bm.Allocate(2, 20, hit));
  EXPECT_EQ(bm.num_free_blocks(), 4);
  EXPECT_EQ(bm.FindCachedPrefix(prompt, 0), hit);
  EXPECT_TRUE(bm.Allocate(2, 16, hit));
  EXPECT_EQ(bm.num_free_blocks(), 0);
}

TEST(BlockManagerTest, LruEvictsOldestCachedAndUncachedFirst) {
  BlockManager bm(6, 2, true);
  const std::vector<int32_t> a = Iota(5, 100);  // 2 full blocks.
  const std::vector<int32_t> b = Iota(5, 200);
  ASSERT_TRUE(bm.Allocate(1, 5));
  bm.CacheFullBlocks(1, a, 5, 0);
  bm.Free(1);  // a released first: oldest.
  ASSERT_TRUE(bm.Allocate(2, 5));
  bm.CacheFullBlocks(2, b, 5, 0);
  bm.Free(2);
  EXPECT_EQ(bm.num_cached_blocks(), 4);
  EXPECT_EQ(bm.FindCachedPrefix(a, 0).size(), 2u);
  EXPECT_EQ(bm.FindCachedPrefix(b, 0).size(), 2u);
  // 2 blocks: served by the two uncached (partial tail) blocks first.
  ASSERT_TRUE(bm.Allocate(3, 4));
  EXPECT_EQ(bm.num_cached_blocks(), 4);
  // One more: evicts a's tail block (a's head is kept longer).
  ASSERT_TRUE(bm.Allocate(4, 2));
  EXPECT_EQ(bm.num_cached_blocks(), 3);
  EXPECT_EQ(bm.FindCachedPrefix(a, 0).size(), 1u);
  EXPECT_EQ(bm.FindCachedPrefix(b, 0).size(), 2u);
  ASSERT_TRUE(bm.Allocate(5, 2));
  EXPECT_TRUE(bm.FindCachedPrefix(a, 0).empty());
  EXPECT_EQ(bm.FindCachedPrefix(b, 0).size(), 2u);
  // A hit moves b out of the free queue, so it is not evicted while used.
  std::vector<int32_t> hit = bm.FindCachedPrefix(b, 0);
  ASSERT_TRUE(bm.Allocate(6, 4, hit));
  EXPECT_EQ(bm.num_free_blocks(), 0);
  EXPECT_FALSE(bm.Allocate(7, 1));
  EXPECT_EQ(bm.FindCachedPrefix(b, 0).size(), 2u);
}

TEST(BlockManagerTest, ResetPrefixCacheAndStats) {
  BlockManager bm(8, 4, true);
  const std::vector<int32_t> p = Iota(12);
  ASSERT_TRUE(bm.Allocate(1, 12));
  bm.CacheFullBlocks(1, p, 12, 0);
  bm.RecordQuery(12, 0);
  std::vector<int32_t> hit = bm.FindCachedPrefix(p, 0);
  EXPECT_EQ(hit.size(), 2u);
  bm.RecordQuery(12, 8);
  EXPECT_EQ(bm.stats().queries, 2);
  EXPECT_DOUBLE_EQ(bm.stats().HitRate(), 8.0 / 24);
  bm.ResetPrefixCache();
  EXPECT_EQ(bm.num_cached_blocks(), 0);
  EXPECT_TRUE(bm.FindCachedPrefix(p, 0).empty());
  bm.Free(1);
  EXPECT_EQ(bm.num_free_blocks(), 8);
}

TEST(BlockManagerTest, DisabledCachingNeverHits) {
  BlockManager bm(8, 4, false);
  const std::vector<int32_t> p = Iota(12);
  ASSERT_TRUE(bm.Allocate(1, 12));
  bm.CacheFullBlocks(1, p, 12, 0);
  EXPECT_EQ(bm.num_cached_blocks(), 0);
  EXPECT_TRUE(bm.FindCachedPrefix(p, 0).empty());
}

// The prefix-cache events a cache-aware router indexes: each newly cached
// block once (tokens, chained parent hash), its eviction, and a reset.
TEST(BlockManagerTest, EventsReportStoredEvictedAndClearedBlocks) {
  BlockManager bm(3, 4, true);
  std::vector<KvCacheEvent> events;
  bm.SetEventListener([&events](const KvCacheEvent& e) { events.push_back(e); });
  const std::vector<int32_t> prompt = Iota(9);  // 2 full blocks + 1 token.
  ASSERT_TRUE(bm.Allocate(1, 9));
  bm.CacheFullBlocks(1, prompt, 9, 0);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, KvCacheEvent::Kind::kStored);
  EXPECT_EQ(events[0].token_ids, std::vector<int32_t>(prompt.begin(), prompt.begin() + 4));
  EXPECT_FALSE(events[0].parent_hash.has_value());
  EXPECT_EQ(events[1].token_ids, std::vector<int32_t>(prompt.begin() + 4, prompt.begin() + 8));
  ASSERT_TRUE(events[1].parent_hash.has_value());
  EXPECT_EQ(*events[1].parent_hash, events[0].block_hash);
  EXPECT_EQ(events[1].block_hash, BlockManager::HashBlock(events[0].block_hash,
                                                          events[1].token_ids, 0));
  // Caching the same blocks again reports nothing new.
  bm.CacheFullBlocks(1, prompt, 9, 0);
  EXPECT_EQ(events.size(), 2u);
  bm.Free(1);
  // A new sequence takes every block: the cached ones are evicted.
  ASSERT_TRUE(bm.Allocate(2, 12));
  std::vector<uint64_t> removed;
  for (const KvCacheEvent& e : events) {
    if (e.kind == KvCacheEvent::Kind::kRemoved) removed.push_back(e.block_hash);
  }
  std::sort(removed.begin(), removed.end());
  std::vector<uint64_t> stored = {events[0].block_hash, events[1].block_hash};
  std::sort(stored.begin(), stored.end());
  EXPECT_EQ(removed, stored);
  bm.ResetPrefixCache();
  EXPECT_EQ(events.back().kind, KvCacheEvent::Kind::kCleared);
}

TEST(BlockManagerTest, DeadBlocksAreReleasedAndStayCached) {
  BlockManager bm(8, 4, /*enable_prefix_caching=*/true);
  const std::vector<int32_t> tokens = Iota(24);
  ASSERT_TRUE(bm.Allocate(1, 16));  // 4 blocks, then computed and cached.
  bm.CacheFullBlocks(1, absl::MakeSpan(tokens).subspan(0, 16), 16, 0);
  const std::vector<int32_t> first = bm.BlockTable(1);
  EXPECT_EQ(bm.num_free_blocks(), 4);
  // The first two fell out of the window: released, placeholders in the
  // table, the table still indexed by position.
  ASSERT_TRUE(bm.Allocate(1, 20, {}, /*dead_blocks=*/2));
  EXPECT_EQ(bm.BlockTable(1).size(), 5u);
  EXPECT_EQ(bm.BlockTable(1)[0], BlockManager::kDeadBlock);
  EXPECT_EQ(bm.BlockTable(1)[1], BlockManager::kDeadBlock);
  EXPECT_EQ(bm.BlockTable(1)[2], first[2]);
  EXPECT_EQ(bm.NumDeadBlocks(1), 2);
  EXPECT_EQ(bm.NumLiveBlocks(1), 3);
  EXPECT_EQ(bm.num_free_blocks(), 5);  // 4 - 1 new + 2 released
  EXPECT_EQ(bm.ref_count(first[0]), 0);
  // Still in the prefix cache: a new sequence with the same prefix finds them.
  EXPECT_EQ(bm.FindCachedPrefix(tokens, 0).size(), 4u);
  // A new sequence admitted past the window takes no block for its dead
  // prefix entries, only for the live ones.
  const std::vector<int32_t> prefix = bm.FindCachedPrefix(tokens, 0);
  ASSERT_TRUE(bm.Allocate(2, 20, prefix, /*dead_blocks=*/3));
  EXPECT_EQ(bm.NumDeadBlocks(2), 3);
  EXPECT_EQ(bm.NumLiveBlocks(2), 2);
  EXPECT_EQ(bm.ref_count(first[3]), 2);
  EXPECT_EQ(bm.ref_count(first[0]), 0);
  // Dead entries are neither hashed again nor released twice.
  bm.CacheFullBlocks(2, tokens, 20, 0);
  bm.Free(1);
  bm.Free(2);
  EXPECT_EQ(bm.num_free_blocks(), 8);
  for (int32_t b = 0; b < 8; ++b) EXPECT_EQ(bm.ref_count(b), 0);
}

}  // namespace
}  // namespace rill::engine
