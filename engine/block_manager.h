// Paged KV block allocator with prefix caching.
//
// A full block is identified by a hash chained over (parent block's hash, the
// block's token ids, an extra key such as a LoRA adapter id), so equal hashes
// mean equal whole prefixes. Blocks are shared by reference count. A block
// whose count drops to 0 stays in the prefix cache (and may be reused by a
// later request) until the allocator needs it again: free blocks form an LRU
// queue, uncached ones in front (taken first), cached ones behind in the
// order they were released, a sequence's tail blocks ahead of its head
// blocks (a prefix's first blocks are the most shareable).
//
// Blocks enter the cache only through CacheFullBlocks, after the step that
// computed them, so no request can reuse a block whose K/V is still being
// written. Not thread-safe: the engine loop owns it.
#ifndef RILL_ENGINE_BLOCK_MANAGER_H_
#define RILL_ENGINE_BLOCK_MANAGER_H_

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace rill::engine {

struct PrefixCacheStats {
  int64_t queries = 0;         // Admissions that looked up the cache.
  int64_t queried_tokens = 0;  // Prompt tokens looked up.
  int64_t hit_tokens = 0;      // Of those, found in the cache.
  double HitRate() const {
    return queried_tokens == 0 ? 0.0 : static_cast<double>(hit_tokens) / queried_tokens;
  }
};

// One change of the prefix cache (vLLM's KV cache events), for a watcher
// outside the engine such as a cache-aware router. Hashes are the chain
// hashes above: a block's hash names its whole prefix.
struct KvCacheEvent {
  enum class Kind { kStored, kRemoved, kCleared };
  Kind kind = Kind::kStored;
  uint64_t block_hash = 0;              // kStored, kRemoved.
  std::optional<uint64_t> parent_hash;  // kStored: unset for a sequence's first block.
  std::vector<int32_t> token_ids;       // kStored: the block's block_size tokens.
};
// Called on the engine loop thread, as the change happens; must be quick.
using KvEventListener = std::function<void(const KvCacheEvent&)>;

class BlockManager {
 public:
  BlockManager(int num_blocks, int block_size, bool enable_prefix_caching);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Blocks with no reference (including evictable cached ones).
  int num_free_blocks() const { return static_cast<int>(free_.size()); }
  // Blocks currently registered in the prefix cache (used or not).
  int num_cached_blocks() const { return static_cast<int>(cached_.size()); }
  int ref_count(int32_t block) const { return blocks_[block].ref_count; }
  // Fraction of blocks referenced by some sequence.
  double Usage() const;
  int64_t BlocksFor(int64_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  static uint64_t HashBlock(uint64_t parent_hash, absl::Span<const int32_t> tokens,
                            uint64_t extra_key);

  // The cached blocks covering the longest prefix of `tokens` made of full
  // blocks, always leaving the last token uncovered (it must be computed to
  // get logits). Takes no references and records no stats.
  std::vector<int32_t> FindCachedPrefix(absl::Span<const int32_t> tokens,
                                        uint64_t extra_key) const;

  // Grows sequence `seq_id`'s table to cover num_total_tokens tokens. A
  // sequence without blocks starts with `cached_prefix` (from
  // FindCachedPrefix, or another live sequence's full blocks to fork them,
  // taken by reference). Returns false and changes nothing
  // when not enough free blocks remain.
  //
  // The table's first `dead_blocks` entries hold keys no later step reads
  // (they fell out of a sliding window that covers every layer): their
  // references are dropped (a cached one stays in the prefix cache) and the
  // entries become kDeadBlock, a placeholder id the model never reads or
  // writes (its attention skips every key before the window). Dead entries
  // stay dead; `dead_blocks` may only grow for a sequence.
  bool Allocate(int64_t seq_id, int64_t num_total_tokens,
                const std::vector<int32_t>& cached_prefix = {}, int64_t dead_blocks = 0);
  static constexpr int32_t kDeadBlock = 0;
  // How many of the sequence's first table entries are dead (0 if unknown).
  int64_t NumDeadBlocks(int64_t seq_id) const;
  // Blocks the sequence holds references to (its table minus dead entries).
  int64_t NumLiveBlocks(int64_t seq_id) const;

  // Registers the sequence's full blocks among its first num_computed_tokens
  // tokens (`tokens` = its prompt + outputs) in the prefix cache.
  void CacheFullBlocks(int64_t seq_id, absl::Span<const int32_t> tokens,
                       int64_t num_computed_tokens, uint64_t extra_key);

  // Shrinks the sequence's table to the blocks covering its first
  // num_tokens tokens, freeing the rest: speculative decoding rolls back the
  // positions of rejected draft tokens. The freed blocks lie past every
  // cached one (CacheFullBlocks registers only computed tokens). No-op for
  // an unknown sequence or a table already that short.
  void Truncate(int64_t seq_id, int64_t num_tokens);

  // Drops the sequence's references; no-op for an unknown sequence.
  void Free(int64_t seq_id);
  bool HasSequence(int64_t seq_id) const { return seqs_.contains(seq_id); }
  // Empty for an unknown sequence.
  const std::vector<int32_t>& BlockTable(int64_t seq_id) const;

  void RecordQuery(int64_t queried_tokens, int64_t hit_tokens);
  const PrefixCacheStats& stats() const { return stats_; }

  // Forgets every cached block hash (blocks in use stay with their
  // sequences, just no longer shareable).
  void ResetPrefixCache();

  // Reports every block entering (kStored) or leaving (kRemoved: evicted for
  // reuse) the prefix cache and every reset (kCleared). Null: none.
  void SetEventListener(KvEventListener listener) { listener_ = std::move(listener); }
  // Called with the sequence's id whenever Free drops a known sequence
  // (finished, aborted, preempted): a draft model's cache, which mirrors
  // these sequences, frees them too. Engine loop thread. Null: none.
  void SetSequenceFreedListener(std::function<void(int64_t seq_id)> listener) {
    freed_listener_ = std::move(listener);
  }

 private:
  struct Block {
    int ref_count = 0;
    bool has_hash = false;
    uint64_t hash = 0;
    bool in_free = false;
    std::list<int32_t>::iterator free_pos;
  };
  struct Sequence {
    std::vector<int32_t> blocks;
    std::vector<uint64_t> hashes;  // Chain hashes of the first full blocks.
    int64_t dead = 0;              // blocks[0, dead) are kDeadBlock placeholders.
  };
  // Drops one reference; a block nobody holds joins the free queue.
  void Release(int32_t block);

  void RemoveFromFree(int32_t block);
  int32_t PopFree();  // Evicts the block's cache entry if it has one.

  const int block_size_;
  const bool prefix_caching_;
  std::vector<Block> blocks_;
  std::list<int32_t> free_;  // Front = next to allocate.
  absl::flat_hash_map<uint64_t, int32_t> cached_;
  absl::flat_hash_map<int64_t, Sequence> seqs_;
  PrefixCacheStats stats_;
  KvEventListener listener_;
  std::function<void(int64_t)> freed_listener_;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_BLOCK_MANAGER_H_
