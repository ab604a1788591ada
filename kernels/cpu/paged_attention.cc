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

// One (query, head): keys are visited block by block; the running max is
// updated once per block so the accumulator is rescaled at most once per
// block_size keys.
void AttendOne(const PagedAttentionArgs& a, const Vec& vec, int64_t qi, int h, float scale,
               float* scores, float* acc) {
  const int hd = a.head_dim;
  const int group = a.num_heads / a.num_kv_heads;
  const int kvh = h / group;
  const int64_t q_stride = a.q_token_stride ? a.q_token_stride : int64_t{a.num_heads} * hd;
  const int64_t o_stride = a.out_token_stride ? a.out_token_stride : int64_t{a.num_heads} * hd;
  const float* q = a.q + qi * q_stride + int64_t{h} * hd;
  float* out = a.out + qi * o_stride + int64_t{h} * hd;
  const int64_t n_keys = std::min(a.context_len, a.start_pos + qi + 1);
  const int64_t row = int64_t{a.num_kv_heads} * hd;  // floats per cache slot
  const int64_t kv_off = int64_t{kvh} * hd;

  std::memset(acc, 0, hd * sizeof(float));
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  for (int64_t b0 = 0; b0 < n_keys; b0 += a.block_size) {
    const int64_t block = a.block_table[b0 / a.block_size];
    const int cnt = static_cast<int>(std::min<int64_t>(a.block_size, n_keys - b0));
    const float* kb = a.k_cache + block * a.block_size * row + kv_off;
    const float* vb = a.v_cache + block * a.block_size * row + kv_off;
    float bm = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < cnt; ++j) {
      scores[j] = vec.dot(q, kb + j * row, hd) * scale;
      bm = std::max(bm, scores[j]);
    }
    const float m_new = std::max(m, bm);
    float c = std::exp(m - m_new);  // 0 on the first block (m = -inf)
    l *= c;
    for (int j = 0; j < cnt; ++j) {
      const float p = std::exp(scores[j] - m_new);
      l += p;
      vec.axpy(acc, c, p, vb + j * row, hd);
      c = 1.0f;
    }
    m = m_new;
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int i = 0; i < hd; ++i) out[i] = acc[i] * inv;
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
  DCHECK(ValidatePagedAttentionArgs(args).ok()) << ValidatePagedAttentionArgs(args);
  const Vec vec = UseAvx2() ? Vec{DotAvx2, ScaleAxpyAvx2} : Vec{DotScalar, ScaleAxpyScalar};
  const float scale = args.scale != 0.0f ? args.scale : 1.0f / std::sqrt(float(args.head_dim));
  const int64_t items = args.n_q * args.num_heads;
  ParallelFor(args.pool, items, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(args.block_size + args.head_dim);
    for (int64_t it = begin; it < end; ++it) {
      AttendOne(args, vec, it / args.num_heads, static_cast<int>(it % args.num_heads), scale,
                scratch.data(), scratch.data() + args.block_size);
    }
  });
}

void PagedAttentionBatch(const PagedAttentionArgs* args, int64_t n, ThreadPool* pool) {
  if (n <= 0) return;
  const Vec vec = UseAvx2() ? Vec{DotAvx2, ScaleAxpyAvx2} : Vec{DotScalar, ScaleAxpyScalar};
  // first[i]: index of call i's first (query, head) item; first[n]: total.
  std::vector<int64_t> first(n + 1, 0);
  std::vector<float> scales(n);
  int64_t scratch_floats = 0;
  for (int64_t i = 0; i < n; ++i) {
    const PagedAttentionArgs& a = args[i];
    DCHECK(ValidatePagedAttentionArgs(a).ok()) << ValidatePagedAttentionArgs(a);
    first[i + 1] = first[i] + a.n_q * a.num_heads;
    scales[i] = a.scale != 0.0f ? a.scale : 1.0f / std::sqrt(float(a.head_dim));
    scratch_floats = std::max<int64_t>(scratch_floats, a.block_size + a.head_dim);
  }
  ParallelFor(pool, first[n], 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(scratch_floats);
    // The call holding item `begin`, then walk forward.
    int64_t c = std::upper_bound(first.begin(), first.end(), begin) - first.begin() - 1;
    for (int64_t it = begin; it < end; ++it) {
      while (it >= first[c + 1]) ++c;
      const PagedAttentionArgs& a = args[c];
      const int64_t local = it - first[c];
      AttendOne(a, vec, local / a.num_heads, static_cast<int>(local % a.num_heads), scales[c],
                scratch.data(), scratch.data() + a.block_size);
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
