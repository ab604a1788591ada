// Causal attention of a chunk of one sequence's query tokens over its
// paged KV cache.
//
// Cache layout per layer: [num_blocks][block_size][num_kv_heads][head_dim]
// (float32), one array for K and one for V. Token position p of a sequence
// lives in block block_table[p / block_size], slot p % block_size.
#ifndef RILL_KERNELS_CPU_PAGED_ATTENTION_H_
#define RILL_KERNELS_CPU_PAGED_ATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/cpu/thread_pool.h"

namespace rill::kernels::cpu {

// How K/V rows are stored in the cache. kF16 (IEEE half, round to nearest
// even, saturated at +-65504) halves the cache's memory and the bytes a long
// context reads per token; the arithmetic stays f32.
enum class KvDtype { kF32, kF16 };

// Bytes of one stored K or V element.
inline int KvDtypeBytes(KvDtype d) { return d == KvDtype::kF16 ? 2 : 4; }

struct PagedAttentionArgs {
  const float* q = nullptr;  // [n_q][q_token_stride], head h at h * head_dim
  float* out = nullptr;      // [n_q][out_token_stride], same head layout
  int64_t q_token_stride = 0;    // 0: num_heads * head_dim
  int64_t out_token_stride = 0;  // 0: num_heads * head_dim
  const void* k_cache = nullptr;  // elements of kv_dtype
  const void* v_cache = nullptr;
  KvDtype kv_dtype = KvDtype::kF32;
  const int32_t* block_table = nullptr;  // the sequence's block ids
  int64_t block_table_len = 0;           // entries in block_table
  int block_size = 16;
  // Query i sits at position start_pos + i and sees keys at positions
  // <= start_pos + i (causal), all of which must already be in the cache.
  int64_t start_pos = 0;
  int64_t n_q = 1;
  // Sliding-window attention (Mistral, Qwen2 sliding layers): a query at
  // position p sees only the keys at positions > p - sliding_window, i.e.
  // itself and the sliding_window - 1 before it (Hugging Face's mask
  // `kv_idx > q_idx - sliding_window`). 0: every earlier key (plain causal).
  // Keys below every query's window need not be in the cache.
  int64_t sliding_window = 0;
  int64_t context_len = 1;  // = start_pos + n_q
  int num_heads = 0;
  int num_kv_heads = 0;  // divides num_heads (GQA / MQA)
  int head_dim = 0;
  float scale = 0.0f;  // 0: 1 / sqrt(head_dim)
  // Gemma 2's attention soft-capping: each scaled score s becomes
  // cap * tanh(s / cap) before the softmax. 0: none. (Runs the per-key
  // path, not the fused block kernels.)
  float logit_softcap = 0.0f;
  // Split-K (flash-decoding): a query that sees more than this many keys has
  // them cut into consecutive pieces of this length (rounded up to a multiple
  // of block_size), attended in parallel and merged. The cut depends only on
  // the query's own key count, so results stay batch and thread-count
  // invariant. 0: kDefaultSplitKeys; negative: never split (tests).
  int64_t split_keys = 0;
  ThreadPool* pool = nullptr;  // parallel over (query, head); may be null
};

// Long enough that the per-piece state and the merge stay negligible, short
// enough that one decode token at a 2k context spreads over many threads.
constexpr int64_t kDefaultSplitKeys = 256;

absl::Status ValidatePagedAttentionArgs(const PagedAttentionArgs& args);

// out = softmax(q k^T * scale + causal (and sliding-window) mask) v per head, with a one-pass
// (online) softmax per query (per key piece, see split_keys). The result for
// a query does not depend on n_q, on which other queries share the call, or
// on the pool's thread count.
void PagedAttention(const PagedAttentionArgs& args);

// PagedAttention for several sequences (each entry one sequence's chunk) in
// one parallel loop on `pool` (the entries' own pool fields are ignored).
// Same results as calling PagedAttention on each entry. Entries may differ
// in kv_dtype.
void PagedAttentionBatch(absl::Span<const PagedAttentionArgs> seqs, ThreadPool* pool);

// Stores n_tokens new K/V rows ([n_tokens][num_kv_heads][head_dim], f32)
// for positions start_pos .. start_pos + n_tokens - 1 of the sequence whose
// blocks are block_table, converted to the cache's dtype.
void WriteKv(const float* k, const float* v, int64_t n_tokens, int64_t start_pos,
             const int32_t* block_table, int block_size, int num_kv_heads, int head_dim,
             void* k_cache, void* v_cache, KvDtype dtype = KvDtype::kF32);

// Same, with an explicit cache slot (block_id * block_size + offset) per
// token, for batches that mix sequences.
void WriteKvSlots(const float* k, const float* v, int64_t n_tokens, const int64_t* slots,
                  int num_kv_heads, int head_dim, void* k_cache, void* v_cache,
                  KvDtype dtype = KvDtype::kF32);

// dst[i] = src[i] as a KvDtype::kF16 element (what the cache stores).
void ConvertToKvF16(const float* src, uint16_t* dst, int64_t n);

}  // namespace rill::kernels::cpu

#endif  // RILL_KERNELS_CPU_PAGED_ATTENTION_H_
