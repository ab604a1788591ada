#include "engine/block_manager.h"

#include <glog/logging.h>

namespace rill::engine {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  // splitmix64 finalizer over a running combination: cheap, well spread.
  uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

BlockManager::BlockManager(int num_blocks, int block_size, bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching), blocks_(num_blocks) {
  CHECK_GT(num_blocks, 0);
  CHECK_GT(block_size, 0);
  for (int32_t b = 0; b < num_blocks; ++b) {
    blocks_[b].free_pos = free_.insert(free_.end(), b);
    blocks_[b].in_free = true;
  }
}

double BlockManager::Usage() const {
  return 1.0 - static_cast<double>(free_.size()) / blocks_.size();
}

uint64_t BlockManager::HashBlock(uint64_t parent_hash, absl::Span<const int32_t> tokens,
                                 uint64_t extra_key) {
  uint64_t h = Mix(parent_hash, extra_key);
  for (int32_t t : tokens) h = Mix(h, static_cast<uint32_t>(t));
  return Mix(h, tokens.size());
}

std::vector<int32_t> BlockManager::FindCachedPrefix(absl::Span<const int32_t> tokens,
                                                    uint64_t extra_key) const {
  std::vector<int32_t> out;
  if (!prefix_caching_ || tokens.empty()) return out;
  const int64_t max_blocks = (static_cast<int64_t>(tokens.size()) - 1) / block_size_;
  uint64_t parent = 0;
  for (int64_t i = 0; i < max_blocks; ++i) {
    const uint64_t h = HashBlock(parent, tokens.subspan(i * block_size_, block_size_), extra_key);
    auto it = cached_.find(h);
    if (it == cached_.end()) break;
    out.push_back(it->second);
    parent = h;
  }
  return out;
}

void BlockManager::RemoveFromFree(int32_t b) {
  Block& block = blocks_[b];
  CHECK(block.in_free);
  free_.erase(block.free_pos);
  block.in_free = false;
}

int32_t BlockManager::PopFree() {
  CHECK(!free_.empty());
  const int32_t b = free_.front();
  RemoveFromFree(b);
  Block& block = blocks_[b];
  if (block.has_hash) {
    auto it = cached_.find(block.hash);
    if (it != cached_.end() && it->second == b) {
      cached_.erase(it);
      if (listener_) listener_({KvCacheEvent::Kind::kRemoved, block.hash, std::nullopt, {}});
    }
    block.has_hash = false;
  }
  return b;
}

bool BlockManager::Allocate(int64_t seq_id, int64_t num_total_tokens,
                            const std::vector<int32_t>& cached_prefix, int64_t dead_blocks) {
  auto it = seqs_.find(seq_id);
  const bool is_new = it == seqs_.end() || it->second.blocks.empty();
  const std::vector<int32_t>& prefix = is_new ? cached_prefix : std::vector<int32_t>{};
  const int64_t have = is_new ? static_cast<int64_t>(prefix.size())
                              : static_cast<int64_t>(it->second.blocks.size());
  const int64_t needed = std::max<int64_t>(0, BlocksFor(num_total_tokens) - have);
  // A new sequence's dead prefix entries take no block; a running one's
  // newly dead blocks are released first, so they count as free here.
  const int64_t dead_prefix = std::min<int64_t>(dead_blocks, prefix.size());
  int64_t freed_now = 0;
  if (!is_new) {
    const Sequence& seq = it->second;
    for (int64_t i = seq.dead; i < std::min<int64_t>(dead_blocks, seq.blocks.size()); ++i) {
      freed_now += blocks_[seq.blocks[i]].ref_count == 1 ? 1 : 0;
    }
  }
  // Cached prefix blocks nobody holds sit in the free queue; taking them
  // shrinks what is left for the new blocks.
  int64_t prefix_in_free = 0;
  for (size_t i = dead_prefix; i < prefix.size(); ++i) {
    prefix_in_free += blocks_[prefix[i]].in_free ? 1 : 0;
  }
  if (needed + prefix_in_free > static_cast<int64_t>(free_.size()) + freed_now) return false;

  Sequence& seq = seqs_[seq_id];
  if (!is_new) {
    for (; seq.dead < std::min<int64_t>(dead_blocks, seq.blocks.size()); ++seq.dead) {
      Release(seq.blocks[seq.dead]);
      seq.blocks[seq.dead] = kDeadBlock;
    }
  }
  bool hashed = true;  // seq.hashes must stay a prefix of the chain.
  for (int32_t b : prefix) {
    if (static_cast<int64_t>(seq.blocks.size()) < dead_prefix) {
      // Out of the window already: the table keeps its place, the cache
      // keeps the block. Its hash still chains the blocks after it.
      hashed = hashed && blocks_[b].has_hash;
      if (hashed) seq.hashes.push_back(blocks_[b].hash);
      seq.blocks.push_back(kDeadBlock);
      seq.dead = seq.blocks.size();
      continue;
    }
    Block& block = blocks_[b];
    // A forked block (n > 1 samples) may be unhashed but is then held.
    CHECK(block.has_hash || block.ref_count > 0) << "prefix block " << b << " was evicted";
    if (block.in_free) RemoveFromFree(b);
    ++block.ref_count;
    seq.blocks.push_back(b);
    hashed = hashed && block.has_hash;
    if (hashed) seq.hashes.push_back(block.hash);
  }
  for (int64_t i = 0; i < needed; ++i) {
    const int32_t b = PopFree();
    blocks_[b].ref_count = 1;
    seq.blocks.push_back(b);
  }
  return true;
}

void BlockManager::CacheFullBlocks(int64_t seq_id, absl::Span<const int32_t> tokens,
                                   int64_t num_computed_tokens, uint64_t extra_key) {
  if (!prefix_caching_) return;
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  Sequence& seq = it->second;
  const int64_t full = std::min<int64_t>(num_computed_tokens / block_size_, seq.blocks.size());
  CHECK_LE(full * block_size_, static_cast<int64_t>(tokens.size()));
  for (int64_t i = seq.hashes.size(); i < full; ++i) {
    const uint64_t parent = i == 0 ? 0 : seq.hashes[i - 1];
    const uint64_t h = HashBlock(parent, tokens.subspan(i * block_size_, block_size_), extra_key);
    seq.hashes.push_back(h);
    if (i < seq.dead) continue;  // A placeholder: its block was never this sequence's.
    Block& block = blocks_[seq.blocks[i]];
    // A duplicate of an already cached block stays private to this sequence.
    if (block.has_hash || cached_.contains(h)) continue;
    block.has_hash = true;
    block.hash = h;
    cached_[h] = seq.blocks[i];
    if (listener_) {
      absl::Span<const int32_t> block_tokens = tokens.subspan(i * block_size_, block_size_);
      listener_({KvCacheEvent::Kind::kStored, h,
                 i == 0 ? std::nullopt : std::optional<uint64_t>(parent),
                 std::vector<int32_t>(block_tokens.begin(), block_tokens.end())});
    }
  }
}

void BlockManager::Release(int32_t b) {
  Block& block = blocks_[b];
  CHECK_GT(block.ref_count, 0);
  if (--block.ref_count > 0) return;
  block.free_pos = block.has_hash ? free_.insert(free_.end(), b) : free_.insert(free_.begin(), b);
  block.in_free = true;
}

void BlockManager::Free(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  const Sequence& seq = it->second;
  for (int64_t i = static_cast<int64_t>(seq.blocks.size()) - 1; i >= seq.dead; --i) {
    Release(seq.blocks[i]);
  }
  seqs_.erase(it);
  if (freed_listener_) freed_listener_(seq_id);
}

void BlockManager::Truncate(int64_t seq_id, int64_t num_tokens) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  Sequence& seq = it->second;
  const size_t keep = static_cast<size_t>(BlocksFor(num_tokens));
  while (seq.blocks.size() > keep) {
    CHECK_LT(seq.hashes.size(), seq.blocks.size()) << "truncating a cached block";
    Block& block = blocks_[seq.blocks.back()];
    CHECK(block.ref_count == 1 && !block.has_hash) << "truncating a shared or cached block";
    block.ref_count = 0;
    // Unhashed: in front, taken first.
    block.free_pos = free_.insert(free_.begin(), seq.blocks.back());
    block.in_free = true;
    seq.blocks.pop_back();
  }
}

int64_t BlockManager::NumDeadBlocks(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0 : it->second.dead;
}

int64_t BlockManager::NumLiveBlocks(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0 : static_cast<int64_t>(it->second.blocks.size()) - it->second.dead;
}

const std::vector<int32_t>& BlockManager::BlockTable(int64_t seq_id) const {
  static const std::vector<int32_t>* const kEmpty = new std::vector<int32_t>();
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? *kEmpty : it->second.blocks;
}

void BlockManager::RecordQuery(int64_t queried_tokens, int64_t hit_tokens) {
  ++stats_.queries;
  stats_.queried_tokens += queried_tokens;
  stats_.hit_tokens += hit_tokens;
}

void BlockManager::ResetPrefixCache() {
  cached_.clear();
  for (Block& block : blocks_) block.has_hash = false;
  if (listener_) listener_({KvCacheEvent::Kind::kCleared, 0, std::nullopt, {}});
  LOG(INFO) << "prefix cache reset";
}

}  // namespace rill::engine
