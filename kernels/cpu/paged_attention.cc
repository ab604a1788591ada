#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/paged_attention_block.h"
#include "kernels/cpu/quant_types.h"

namespace rill::kernels::cpu {
namespace {

// Cache elements (KvDtype) as floats: T is float (kF32) or uint16_t (kF16
// bits). Each stored element converts to exactly one float, so the kernels
// below do the same arithmetic whatever the dtype.
inline float ToF(float x) { return x; }
inline float ToF(uint16_t h) { return F16ToF32(h); }

RILL_TARGET_AVX2 inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
RILL_TARGET_AVX2 inline __m256 Load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

template <typename T>
float DotScalar(const float* a, const T* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * ToF(b[i]);
  return s;
}

// acc = acc * c + p * v
template <typename T>
void ScaleAxpyScalar(float* acc, float c, float p, const T* v, int n) {
  for (int i = 0; i < n; ++i) acc[i] = acc[i] * c + p * ToF(v[i]);
}

template <typename T>
RILL_TARGET_AVX2 float DotAvx2(const float* a, const T* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), Load8(b + i), acc);
  float s = internal::HsumPs8(acc);
  for (; i < n; ++i) s += a[i] * ToF(b[i]);
  return s;
}

template <typename T>
RILL_TARGET_AVX2 void ScaleAxpyAvx2(float* acc, float c, float p, const T* v, int n) {
  const __m256 vc = _mm256_set1_ps(c);
  const __m256 vp = _mm256_set1_ps(p);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_mul_ps(_mm256_loadu_ps(acc + i), vc);
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vp, Load8(v + i), a));
  }
  for (; i < n; ++i) acc[i] = acc[i] * c + p * ToF(v[i]);
}

// One (query, head) against the cnt keys of a block (K/V rows `row` floats
// apart): the online-softmax update of m, l and acc. Scores are computed with
// two 8-lane chains per key, exponentials 8 at a time, and the weighted V sum
// kept in registers across the block (acc is read and written once per block,
// not once per key). The same code for every tile, so results stay invariant.
template <typename T>
RILL_TARGET_AVX2 void BlockUpdateAvx2(const float* q, const T* kb, const T* vb,
                                      int64_t row, int cnt, int hd, float scale, float* scores,
                                      float* m, float* l, float* acc) {
  float bm = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < cnt; ++j) {
    const T* k = kb + j * row;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int d = 0;
    for (; d + 16 <= hd; d += 16) {
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), Load8(k + d), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), Load8(k + d + 8), s1);
    }
    if (d < hd) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), Load8(k + d), s0);
    scores[j] = internal::HsumPs8(_mm256_add_ps(s0, s1)) * scale;
    bm = std::max(bm, scores[j]);
  }
  const float m_new = std::max(*m, bm);
  // 0 on the first block (m = -inf); exactly 1 while the max holds (no exp).
  const float c = *m == m_new ? 1.0f : std::exp(*m - m_new);
  const __m256 vm = _mm256_set1_ps(m_new);
  int j0 = 0;
  for (; j0 + 8 <= cnt; j0 += 8) {
    _mm256_storeu_ps(scores + j0,
                     internal::ExpPs(_mm256_sub_ps(_mm256_loadu_ps(scores + j0), vm)));
  }
  if (j0 < cnt) {  // the tail through a padded copy: scores holds only cnt
    alignas(32) float tail[8];
    for (int j = 0; j < 8; ++j) tail[j] = j0 + j < cnt ? scores[j0 + j] : m_new;
    _mm256_store_ps(tail, internal::ExpPs(_mm256_sub_ps(_mm256_load_ps(tail), vm)));
    for (int j = j0; j < cnt; ++j) scores[j] = tail[j - j0];
  }
  float sum = 0.0f;
  for (int j = 0; j < cnt; ++j) sum += scores[j];
  *l = *l * c + sum;
  *m = m_new;
  const __m256 vc = _mm256_set1_ps(c);
  int d = 0;
  for (; d + 32 <= hd; d += 32) {
    // Four 8-float registers of acc, every key of the block into them.
    __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(acc + d), vc);
    __m256 a1 = _mm256_mul_ps(_mm256_loadu_ps(acc + d + 8), vc);
    __m256 a2 = _mm256_mul_ps(_mm256_loadu_ps(acc + d + 16), vc);
    __m256 a3 = _mm256_mul_ps(_mm256_loadu_ps(acc + d + 24), vc);
    for (int j = 0; j < cnt; ++j) {
      const __m256 p = _mm256_set1_ps(scores[j]);
      const T* v = vb + j * row + d;
      a0 = _mm256_fmadd_ps(p, Load8(v), a0);
      a1 = _mm256_fmadd_ps(p, Load8(v + 8), a1);
      a2 = _mm256_fmadd_ps(p, Load8(v + 16), a2);
      a3 = _mm256_fmadd_ps(p, Load8(v + 24), a3);
    }
    _mm256_storeu_ps(acc + d, a0);
    _mm256_storeu_ps(acc + d + 8, a1);
    _mm256_storeu_ps(acc + d + 16, a2);
    _mm256_storeu_ps(acc + d + 24, a3);
  }
  for (; d < hd; d += 8) {
    __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(acc + d), vc);
    for (int j = 0; j < cnt; ++j) {
      a0 = _mm256_fmadd_ps(_mm256_set1_ps(scores[j]), Load8(vb + j * row + d), a0);
    }
    _mm256_storeu_ps(acc + d, a0);
  }
}

// The kernels for cache elements of type T.
template <typename T>
struct Vec {
  float (*dot)(const float*, const T*, int);
  void (*axpy)(float*, float, float, const T*, int);
  // The whole block of keys for one (query, head) at once, or null (the
  // per-key dot/axpy loop).
  void (*block)(const float*, const T*, const T*, int64_t, int, int, float, float*, float*,
                float*, float*);
};

// AVX-512 where the head size allows it (every call of a model has the same
// head size, so one model never mixes the two kernels).
template <typename T>
void BlockUpdateWidest(const float* q, const T* kb, const T* vb, int64_t row, int cnt, int hd,
                       float scale, float* scores, float* m, float* l, float* acc) {
  if (hd % 16 == 0 && hd <= internal::kMaxAvx512HeadDim) {
    return internal::BlockUpdateAvx512(q, kb, vb, row, cnt, hd, scale, scores, m, l, acc);
  }
  BlockUpdateAvx2<T>(q, kb, vb, row, cnt, hd, scale, scores, m, l, acc);
}

template <typename T>
Vec<T> VecFor() {
  if (!UseAvx2()) return Vec<T>{DotScalar<T>, ScaleAxpyScalar<T>, nullptr};
  return Vec<T>{DotAvx2<T>, ScaleAxpyAvx2<T>,
                UseAvx512() ? BlockUpdateWidest<T> : BlockUpdateAvx2<T>};
}

// Queries of one sequence taken together, and with them all the query heads
// that share one KV head (GQA), so each K/V block is read from memory once per
// tile instead of once per (query, head). Every (query, head) still runs the
// exact arithmetic of a lone query, in the same order, so results do not
// depend on the tiling or on the other queries in the call.
constexpr int64_t kQueryTile = 8;

// Partial softmax states one parallel wave may hold (floats): bounds the
// scratch of long prefills, which are cut into several waves.
constexpr int64_t kMaxWavePartials = int64_t{1} << 20;

// Keys per split piece for a: a multiple of block_size, or 0 (never split).
int64_t PieceLen(const PagedAttentionArgs& a) {
  if (a.split_keys < 0) return 0;
  const int64_t want = a.split_keys > 0 ? a.split_keys : kDefaultSplitKeys;
  return (want + a.block_size - 1) / a.block_size * a.block_size;
}

// Pieces a query seeing n_keys keys is cut into (its own key count only).
int64_t NumPieces(int64_t n_keys, int64_t piece) {
  return piece == 0 || n_keys <= piece ? 1 : (n_keys + piece - 1) / piece;
}

// One (query tile, KV head): its pieces run as separate parallel items.
struct Tile {
  const PagedAttentionArgs* args;
  int64_t q_begin;
  int64_t q_end;
  int kv_head;
  int64_t piece;     // PieceLen(*args)
  int64_t pieces;    // pieces of the tile's longest query
  float* partials;   // [pieces][n_states][2 + head_dim] when pieces > 1
};

int64_t NumStates(const Tile& t) {
  return (t.q_end - t.q_begin) * (t.args->num_heads / t.args->num_kv_heads);
}

int64_t KeysOf(const PagedAttentionArgs& a, int64_t qi) {
  return std::min(a.context_len, a.start_pos + qi + 1);
}

// The first key query qi sees: 0, or the start of its sliding window.
int64_t FirstKeyOf(const PagedAttentionArgs& a, int64_t qi) {
  if (a.sliding_window <= 0) return 0;
  return std::max<int64_t>(0, a.start_pos + qi + 1 - a.sliding_window);
}

// Per (query, head) online-softmax state.
struct TileState {
  float* m;    // [n_states] running max
  float* l;    // [n_states] running sum of exp
  float* acc;  // [n_states][head_dim] running weighted sum of V
};

TileState StateAt(float* base, int64_t n_states) {
  return {base, base + n_states, base + 2 * n_states};
}

// Online softmax of the tile's queries over keys [k_begin, k_end) (each
// query stopping at its causal limit) into st, which starts empty. Keys are
// visited block by block; the running max is updated once per block so each
// accumulator is rescaled at most once per block_size keys.
template <typename T>
void AttendKeys(const Tile& tile, int64_t k_begin, int64_t k_end, const Vec<T>& vec, float scale,
                float* scores, TileState st) {
  const PagedAttentionArgs& a = *tile.args;
  const int hd = a.head_dim;
  const int group = a.num_heads / a.num_kv_heads;
  const int64_t n_tile = tile.q_end - tile.q_begin;
  const int64_t n_states = n_tile * group;
  const int64_t q_stride = a.q_token_stride ? a.q_token_stride : int64_t{a.num_heads} * hd;
  const int64_t row = int64_t{a.num_kv_heads} * hd;  // floats per cache slot
  const int64_t kv_off = int64_t{tile.kv_head} * hd;
  std::fill(st.m, st.m + n_states, -std::numeric_limits<float>::infinity());
  std::fill(st.l, st.l + n_states, 0.0f);
  std::fill(st.acc, st.acc + n_states * hd, 0.0f);
  for (int64_t b0 = k_begin; b0 < k_end; b0 += a.block_size) {
    const int64_t block = a.block_table[b0 / a.block_size];
    const T* kb = static_cast<const T*>(a.k_cache) + block * a.block_size * row + kv_off;
    const T* vb = static_cast<const T*>(a.v_cache) + block * a.block_size * row + kv_off;
    for (int64_t t = 0; t < n_tile; ++t) {
      const int64_t qi = tile.q_begin + t;
      const int64_t n_keys = KeysOf(a, qi);
      if (b0 >= n_keys) continue;
      // A window starting inside this block skips the block's first keys.
      const int64_t skip = std::max<int64_t>(0, FirstKeyOf(a, qi) - b0);
      if (skip >= a.block_size) continue;
      const int cnt = static_cast<int>(std::min<int64_t>(a.block_size, n_keys - b0) - skip);
      const T* kq = kb + skip * row;
      const T* vq = vb + skip * row;
      for (int g = 0; g < group; ++g) {
        const int h = tile.kv_head * group + g;
        const float* q = a.q + qi * q_stride + int64_t{h} * hd;
        const int64_t s = t * group + g;
        float* acc_h = st.acc + s * hd;
        if (vec.block && hd % 8 == 0 && a.logit_softcap == 0.0f) {
          vec.block(q, kq, vq, row, cnt, hd, scale, scores, &st.m[s], &st.l[s], acc_h);
          continue;
        }
        float bm = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < cnt; ++j) {
          scores[j] = vec.dot(q, kq + j * row, hd) * scale;
          if (a.logit_softcap != 0.0f) {
            scores[j] = a.logit_softcap * std::tanh(scores[j] / a.logit_softcap);
          }
          bm = std::max(bm, scores[j]);
        }
        const float m_new = std::max(st.m[s], bm);
        float c = std::exp(st.m[s] - m_new);  // 0 on the first block (m = -inf)
        st.l[s] *= c;
        for (int j = 0; j < cnt; ++j) {
          const float p = std::exp(scores[j] - m_new);
          st.l[s] += p;
          vec.axpy(acc_h, c, p, vq + j * row, hd);
          c = 1.0f;
        }
        st.m[s] = m_new;
      }
    }
  }
}

float* OutRow(const PagedAttentionArgs& a, int64_t qi, int h) {
  const int64_t o_stride =
      a.out_token_stride ? a.out_token_stride : int64_t{a.num_heads} * a.head_dim;
  return a.out + qi * o_stride + int64_t{h} * a.head_dim;
}

// out = acc / l for the tile's queries that fit in one piece (all of them
// when unsplit); the others are left to MergePieces.
void WriteSinglePiece(const Tile& tile, TileState st) {
  const PagedAttentionArgs& a = *tile.args;
  const int group = a.num_heads / a.num_kv_heads;
  for (int64_t t = 0; t < tile.q_end - tile.q_begin; ++t) {
    const int64_t qi = tile.q_begin + t;
    if (NumPieces(KeysOf(a, qi), tile.piece) > 1) continue;
    for (int g = 0; g < group; ++g) {
      const int64_t s = t * group + g;
      float* out = OutRow(a, qi, tile.kv_head * group + g);
      const float inv = st.l[s] > 0.0f ? 1.0f / st.l[s] : 0.0f;
      for (int i = 0; i < a.head_dim; ++i) out[i] = st.acc[s * a.head_dim + i] * inv;
    }
  }
}

// Combines each split query's pieces, in piece order: rescale every piece
// to the overall max, sum, normalise.
void MergePieces(const Tile& tile) {
  const PagedAttentionArgs& a = *tile.args;
  const int hd = a.head_dim;
  const int group = a.num_heads / a.num_kv_heads;
  const int64_t n_states = NumStates(tile);
  const int64_t stride = n_states * (2 + hd);  // floats per piece
  for (int64_t t = 0; t < tile.q_end - tile.q_begin; ++t) {
    const int64_t qi = tile.q_begin + t;
    const int64_t pieces = NumPieces(KeysOf(a, qi), tile.piece);
    if (pieces == 1) continue;
    for (int g = 0; g < group; ++g) {
      const int64_t s = t * group + g;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t p = 0; p < pieces; ++p) m = std::max(m, tile.partials[p * stride + s]);
      float* out = OutRow(a, qi, tile.kv_head * group + g);
      std::fill(out, out + hd, 0.0f);
      float l = 0.0f;
      for (int64_t p = 0; p < pieces; ++p) {
        const TileState st = StateAt(tile.partials + p * stride, n_states);
        const float c = std::exp(st.m[s] - m);
        l += st.l[s] * c;
        for (int i = 0; i < hd; ++i) out[i] += st.acc[s * hd + i] * c;
      }
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      for (int i = 0; i < hd; ++i) out[i] *= inv;
    }
  }
}

float ScaleOf(const PagedAttentionArgs& a) {
  return a.scale != 0.0f ? a.scale : 1.0f / std::sqrt(float(a.head_dim));
}

// Runs the tiles' pieces in one parallel loop, then merges the split ones.
template <typename T>
void RunWave(absl::Span<const Tile> tiles, const Vec<T>& vec, ThreadPool* pool) {
  struct Item {
    const Tile* tile;
    int64_t piece_index;
  };
  std::vector<Item> items;
  std::vector<const Tile*> split;
  for (const Tile& t : tiles) {
    for (int64_t p = 0; p < t.pieces; ++p) items.push_back({&t, p});
    if (t.pieces > 1) split.push_back(&t);
  }
  ParallelFor(pool, static_cast<int64_t>(items.size()), 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t i = begin; i < end; ++i) {
      const Tile& tile = *items[i].tile;
      const PagedAttentionArgs& a = *tile.args;
      const int64_t n_states = NumStates(tile);
      const int64_t max_keys = KeysOf(a, tile.q_end - 1);
      scratch.resize(a.block_size + (tile.pieces > 1 ? 0 : n_states * (2 + a.head_dim)));
      float* state = tile.pieces > 1
                         ? tile.partials + items[i].piece_index * n_states * (2 + a.head_dim)
                         : scratch.data() + a.block_size;
      const int64_t k_begin = items[i].piece_index * tile.piece;
      const int64_t k_end = tile.pieces > 1 ? std::min(max_keys, k_begin + tile.piece) : max_keys;
      const TileState st = StateAt(state, n_states);
      AttendKeys(tile, k_begin, k_end, vec, ScaleOf(a), scratch.data(), st);
      if (items[i].piece_index == 0) WriteSinglePiece(tile, st);
    }
  });
  // A merge is ~1/piece of its pieces' work: a few queries per chunk.
  ParallelFor(pool, static_cast<int64_t>(split.size()), 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) MergePieces(*split[i]);
  });
}

}  // namespace

absl::Status ValidatePagedAttentionArgs(const PagedAttentionArgs& a) {
  if (!a.q || !a.out || !a.k_cache || !a.v_cache || !a.block_table) {
    return absl::InvalidArgumentError("PagedAttention: null pointer");
  }
  if (a.kv_dtype != KvDtype::kF32 && a.kv_dtype != KvDtype::kF16) {
    return absl::InvalidArgumentError("PagedAttention: unknown kv dtype");
  }
  if (a.num_heads <= 0 || a.num_kv_heads <= 0 || a.num_heads % a.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttention: heads ", a.num_heads, "/",
                                                   a.num_kv_heads));
  }
  if (a.head_dim <= 0 || a.block_size <= 0 || a.n_q < 0 || a.start_pos < 0 ||
      a.sliding_window < 0 || !(a.logit_softcap >= 0.0f)) {
    return absl::InvalidArgumentError("PagedAttention: bad sizes");
  }
  if (a.context_len < a.start_pos + a.n_q) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttention: context_len ", a.context_len,
                                                   " < start_pos + n_q ", a.start_pos + a.n_q));
  }
  if ((a.context_len + a.block_size - 1) / a.block_size > a.block_table_len) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttention: block table of ",
                                                   a.block_table_len, " blocks for ",
                                                   a.context_len, " tokens"));
  }
  return absl::OkStatus();
}

void PagedAttention(const PagedAttentionArgs& args) {
  PagedAttentionBatch(absl::MakeConstSpan(&args, 1), args.pool);
}

namespace {

// The entries of seqs whose kv_dtype stores T, in one parallel loop per
// wave: many short decode sequences then share one dispatch instead of
// paying one each. Long prefills are cut into waves so the split pieces'
// partial states stay bounded.
template <typename T>
void RunBatch(absl::Span<const PagedAttentionArgs> seqs, KvDtype dtype, ThreadPool* pool) {
  const Vec<T> vec = VecFor<T>();
  thread_local std::vector<float> partials;
  std::vector<Tile> tiles;
  std::vector<int64_t> offsets;  // into partials, per tile (pointers after resize)
  int64_t used = 0;
  auto flush = [&] {
    if (partials.size() < static_cast<size_t>(used)) partials.resize(used);
    for (size_t i = 0; i < tiles.size(); ++i) tiles[i].partials = partials.data() + offsets[i];
    RunWave(tiles, vec, pool);
    tiles.clear();
    offsets.clear();
    used = 0;
  };
  for (const PagedAttentionArgs& a : seqs) {
    if (a.kv_dtype != dtype) continue;
    DCHECK(ValidatePagedAttentionArgs(a).ok()) << ValidatePagedAttentionArgs(a);
    const int64_t piece = PieceLen(a);
    for (int64_t q0 = 0; q0 < a.n_q; q0 += kQueryTile) {
      const int64_t q1 = std::min(a.n_q, q0 + kQueryTile);
      const int64_t pieces = NumPieces(KeysOf(a, q1 - 1), piece);
      for (int kvh = 0; kvh < a.num_kv_heads; ++kvh) {
        Tile t{&a, q0, q1, kvh, piece, pieces, nullptr};
        const int64_t need = pieces > 1 ? pieces * NumStates(t) * (2 + a.head_dim) : 0;
        if (used > 0 && used + need > kMaxWavePartials) flush();
        tiles.push_back(t);
        offsets.push_back(used);
        used += need;
      }
    }
  }
  if (!tiles.empty()) flush();
}

}  // namespace

void PagedAttentionBatch(absl::Span<const PagedAttentionArgs> seqs, ThreadPool* pool) {
  bool f32 = false, f16 = false;
  for (const PagedAttentionArgs& a : seqs) {
    (a.kv_dtype == KvDtype::kF16 ? f16 : f32) = true;
  }
  if (f32) RunBatch<float>(seqs, KvDtype::kF32, pool);
  if (f16) RunBatch<uint16_t>(seqs, KvDtype::kF16, pool);
}

void WriteKv(const float* k, const float* v, int64_t n_tokens, int64_t start_pos,
             const int32_t* block_table, int block_size, int num_kv_heads, int head_dim,
             void* k_cache, void* v_cache, KvDtype dtype) {
  std::vector<int64_t> slots(n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t p = start_pos + t;
    slots[t] = int64_t{block_table[p / block_size]} * block_size + p % block_size;
  }
  WriteKvSlots(k, v, n_tokens, slots.data(), num_kv_heads, head_dim, k_cache, v_cache, dtype);
}

void WriteKvSlots(const float* k, const float* v, int64_t n_tokens, const int64_t* slots,
                  int num_kv_heads, int head_dim, void* k_cache, void* v_cache, KvDtype dtype) {
  const int64_t row = int64_t{num_kv_heads} * head_dim;
  for (int64_t t = 0; t < n_tokens; ++t) {
    if (dtype == KvDtype::kF16) {
      ConvertToKvF16(k + t * row, static_cast<uint16_t*>(k_cache) + slots[t] * row, row);
      ConvertToKvF16(v + t * row, static_cast<uint16_t*>(v_cache) + slots[t] * row, row);
    } else {
      std::memcpy(static_cast<float*>(k_cache) + slots[t] * row, k + t * row, row * sizeof(float));
      std::memcpy(static_cast<float*>(v_cache) + slots[t] * row, v + t * row, row * sizeof(float));
    }
  }
}

namespace {

// Saturates at the largest finite half (an overflow to inf would turn the
// softmax into NaN); NaN stays NaN.
constexpr float kHalfMax = 65504.0f;

// The scalar rounding the vector path's tail and the no-AVX2 path share.
inline uint16_t ToKvHalf(float x) {
  return F32ToF16(x > kHalfMax ? kHalfMax : (x < -kHalfMax ? -kHalfMax : x));
}

RILL_TARGET_AVX2 void ConvertToKvF16Avx2(const float* src, uint16_t* dst, int64_t n) {
  const __m256 hi = _mm256_set1_ps(kHalfMax), lo = _mm256_set1_ps(-kHalfMax);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // min/max return their second operand when one is NaN: x goes second.
    const __m256 x = _mm256_max_ps(lo, _mm256_min_ps(hi, _mm256_loadu_ps(src + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) dst[i] = ToKvHalf(src[i]);
}

}  // namespace

void ConvertToKvF16(const float* src, uint16_t* dst, int64_t n) {
  if (UseAvx2()) {
    ConvertToKvF16Avx2(src, dst, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = ToKvHalf(src[i]);
}

}  // namespace rill::kernels::cpu
