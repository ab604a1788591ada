#include "kernels/cpu/paged_attention.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/cpu_features.h"

namespace rill::cpu {
namespace {

float DotScalar(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// acc = acc * c + p * v
void ScaleAxpyScalar(float* acc, float c, float p, const float* v, int n) {
  for (int i = 0; i < n; ++i) acc[i] = acc[i] * c + p * v[i];
}

RILL_TARGET_AVX2 float DotAvx2(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float s = internal::HsumPs8(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

RILL_TARGET_AVX2 void ScaleAxpyAvx2(float* acc, float c, float p, const float* v, int n) {
  const __m256 vc = _mm256_set1_ps(c);
  const __m256 vp = _mm256_set1_ps(p);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_mul_ps(_mm256_loadu_ps(acc + i), vc);
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vp, _mm256_loadu_ps(v + i), a));
  }
  for (; i < n; ++i) acc[i] = acc[i] * c + p * v[i];
}

struct Vec {
  float (*dot)(const float*, const float*, int);
  void (*axpy)(float*, float, float, const float*, int);
};

// Queries of one sequence taken together, and with them all the query heads
// that share one KV head (GQA), so each K/V block is read from memory once per
// tile instead of once per (query, head). Every (query, head) still runs the
// exact arithmetic of a lone query, in the same order, so results do not
// depend on the tiling or on the other queries in the call.
constexpr int64_t kQueryTile = 8;

struct WorkItem {
  const PagedAttentionArgs* args;
  int64_t q_begin;
  int64_t q_end;
  int kv_head;
};

// Per (query, head) online-softmax state, in scratch owned by the caller.
struct TileState {
  float* m;    // running max
  float* l;    // running sum of exp
  float* acc;  // [head_dim] running weighted sum of V
};

// Keys are visited block by block; the running max is updated once per block
// so each accumulator is rescaled at most once per block_size keys.
void AttendTile(const WorkItem& item, const Vec& vec, float scale, std::vector<float>* scratch) {
  const PagedAttentionArgs& a = *item.args;
  const int hd = a.head_dim;
  const int group = a.num_heads / a.num_kv_heads;
  const int64_t n_tile = item.q_end - item.q_begin;
  const int64_t q_stride = a.q_token_stride ? a.q_token_stride : int64_t{a.num_heads} * hd;
  const int64_t o_stride = a.out_token_stride ? a.out_token_stride : int64_t{a.num_heads} * hd;
  const int64_t row = int64_t{a.num_kv_heads} * hd;  // floats per cache slot
  const int64_t kv_off = int64_t{item.kv_head} * hd;
  const int64_t n_states = n_tile * group;

  scratch->assign(a.block_size + n_states * (2 + hd), 0.0f);
  float* scores = scratch->data();
  float* m = scores + a.block_size;
  float* l = m + n_states;
  float* acc = l + n_states;
  for (int64_t i = 0; i < n_states; ++i) m[i] = -std::numeric_limits<float>::infinity();

  // The last query of the tile sees the most keys.
  const int64_t max_keys = std::min(a.context_len, a.start_pos + item.q_end);
  for (int64_t b0 = 0; b0 < max_keys; b0 += a.block_size) {
    const int64_t block = a.block_table[b0 / a.block_size];
    const float* kb = a.k_cache + block * a.block_size * row + kv_off;
    const float* vb = a.v_cache + block * a.block_size * row + kv_off;
    for (int64_t t = 0; t < n_tile; ++t) {
      const int64_t qi = item.q_begin + t;
      const int64_t n_keys = std::min(a.context_len, a.start_pos + qi + 1);
      if (b0 >= n_keys) continue;
      const int cnt = static_cast<int>(std::min<int64_t>(a.block_size, n_keys - b0));
      for (int g = 0; g < group; ++g) {
        const int h = item.kv_head * group + g;
        const float* q = a.q + qi * q_stride + int64_t{h} * hd;
        const int64_t st = t * group + g;
        float* acc_h = acc + st * hd;
        float bm = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < cnt; ++j) {
          scores[j] = vec.dot(q, kb + j * row, hd) * scale;
          bm = std::max(bm, scores[j]);
        }
        const float m_new = std::max(m[st], bm);
        float c = std::exp(m[st] - m_new);  // 0 on the first block (m = -inf)
        l[st] *= c;
        for (int j = 0; j < cnt; ++j) {
          const float p = std::exp(scores[j] - m_new);
          l[st] += p;
          vec.axpy(acc_h, c, p, vb + j * row, hd);
          c = 1.0f;
        }
        m[st] = m_new;
      }
    }
  }
  for (int64_t t = 0; t < n_tile; ++t) {
    for (int g = 0; g < group; ++g) {
      const int64_t st = t * group + g;
      const int h = item.kv_head * group + g;
      float* out = a.out + (item.q_begin + t) * o_stride + int64_t{h} * hd;
      const float inv = l[st] > 0.0f ? 1.0f / l[st] : 0.0f;
      for (int i = 0; i < hd; ++i) out[i] = acc[st * hd + i] * inv;
    }
  }
}

}  // namespace

absl::Status ValidatePagedAttentionArgs(const PagedAttentionArgs& a) {
  if (!a.q || !a.out || !a.k_cache || !a.v_cache || !a.block_table) {
    return absl::InvalidArgumentError("PagedAttention: null pointer");
  }
  if (a.kv_dtype != KvDtype::kF32) return absl::UnimplementedError("PagedAttention: kv dtype");
  if (a.num_heads <= 0 || a.num_kv_heads <= 0 || a.num_heads % a.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttention: heads ", a.num_heads, "/",
                                                   a.num_kv_heads));
  }
  if (a.head_dim <= 0 || a.block_size <= 0 || a.n_q < 0 || a.start_pos < 0) {
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

void PagedAttentionBatch(absl::Span<const PagedAttentionArgs> seqs, ThreadPool* pool) {
  const Vec vec = UseAvx2() ? Vec{DotAvx2, ScaleAxpyAvx2} : Vec{DotScalar, ScaleAxpyScalar};
  // One parallel loop over the whole batch: many short decode sequences then
  // share one dispatch instead of paying one each.
  std::vector<WorkItem> items;
  for (const PagedAttentionArgs& a : seqs) {
    DCHECK(ValidatePagedAttentionArgs(a).ok()) << ValidatePagedAttentionArgs(a);
    for (int64_t q0 = 0; q0 < a.n_q; q0 += kQueryTile) {
      for (int kvh = 0; kvh < a.num_kv_heads; ++kvh) {
        items.push_back({&a, q0, std::min(a.n_q, q0 + kQueryTile), kvh});
      }
    }
  }
  ParallelFor(pool, static_cast<int64_t>(items.size()), 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t i = begin; i < end; ++i) {
      const PagedAttentionArgs& a = *items[i].args;
      const float scale = a.scale != 0.0f ? a.scale : 1.0f / std::sqrt(float(a.head_dim));
      AttendTile(items[i], vec, scale, &scratch);
    }
  });
}

void WriteKv(const float* k, const float* v, int64_t n_tokens, int64_t start_pos,
             const int32_t* block_table, int block_size, int num_kv_heads, int head_dim,
             float* k_cache, float* v_cache) {
  std::vector<int64_t> slots(n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t p = start_pos + t;
    slots[t] = int64_t{block_table[p / block_size]} * block_size + p % block_size;
  }
  WriteKvSlots(k, v, n_tokens, slots.data(), num_kv_heads, head_dim, k_cache, v_cache);
}

void WriteKvSlots(const float* k, const float* v, int64_t n_tokens, const int64_t* slots,
                  int num_kv_heads, int head_dim, float* k_cache, float* v_cache) {
  const int64_t row = int64_t{num_kv_heads} * head_dim;
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::memcpy(k_cache + slots[t] * row, k + t * row, row * sizeof(float));
    std::memcpy(v_cache + slots[t] * row, v + t * row, row * sizeof(float));
  }
}

}  // namespace rill::cpu
