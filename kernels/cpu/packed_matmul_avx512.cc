// The packed int16 MatMul (see packed_matmul.h): activation quantization and
// the AVX-512 VNNI tiles. vpdpwssd multiplies 32 int16 pairs per instruction,
// twice the multiply-adds of an f32 fma, and the packed rows expand to int16
// with a shift and a mask (no float conversion, no table).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/packed_matmul.h"

#define RILL_TARGET_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

namespace rill::kernels::cpu {
namespace {

// One token's 32-block: q = round(x / d), s = d * sum(q) (the min term).
struct BlockQ16 {
  float d;
  float s;
  int16_t q[32];
};
static_assert(sizeof(BlockQ16) == 72, "packed");

constexpr int kMaxTokens = 8;  // token tile: 8 int + 8 float accumulators

bool DetectVnni() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
#else
  return false;
#endif
}

RILL_TARGET_VNNI void QuantizeRow(const float* x, BlockQ16* out, int64_t nb) {
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 lo = _mm512_loadu_ps(x + 32 * b);
    const __m512 hi = _mm512_loadu_ps(x + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_and_ps(lo, abs_mask), _mm512_and_ps(hi, abs_mask)));
    const float d = amax / 32767.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    // Round to nearest even; |x * id| <= 32767 (+ rounding), clamped by the
    // saturating pack.
    const __m512i qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, vid));
    const __m512i qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, vid));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].q), _mm512_cvtsepi32_epi16(qlo));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].q + 16), _mm512_cvtsepi32_epi16(qhi));
    // |x * id| rounds to at most 32767, so the int32 values are the stored ones.
    const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi));
    out[b].d = d;
    out[b].s = d * static_cast<float>(sum);
  }
}

RILL_TARGET_VNNI inline __m512i Pair(const BlockQ16& x, int j) {
  int32_t v;
  std::memcpy(&v, x.q + 2 * j, sizeof(v));
  return _mm512_set1_epi32(v);
}

// The float epilogue of one block, the same for every tile: acc +=
// float(S) * (d_row * d_x) [+ m_row * s_x].
template <bool kMin>
RILL_TARGET_VNNI inline __m512 Epilogue(__m512i sum, __m512 d, __m512 m, const BlockQ16& x,
                                        __m512 acc) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, _mm512_set1_ps(x.d)), acc);
  if (kMin) acc = _mm512_fmadd_ps(m, _mm512_set1_ps(x.s), acc);
  return acc;
}

// One group (16 rows) x T tokens. A independent integer accumulators per
// token hide vpdpwssd's latency when T is small; integer sums are exact, so
// A does not change the result.
template <bool k8Bit, int T, int A>
RILL_TARGET_VNNI void GroupTile(const uint8_t* gw, size_t block_bytes, int64_t nb,
                                const BlockQ16* x, int64_t x_stride, float* out,
                                int64_t out_stride, int valid_rows) {
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i mask = _mm512_set1_epi32(0x000F000F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = gw + b * block_bytes;
    _mm_prefetch(reinterpret_cast<const char*>(wb + 4 * block_bytes), _MM_HINT_T0);
    __m512i isum[T][A];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
      for (int a = 0; a < A; ++a) isum[t][a] = _mm512_setzero_si512();
    }
    if (k8Bit) {
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        const __m512i w = _mm512_cvtepi8_epi16(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + 32 * j)));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          isum[t][j % A] = _mm512_dpwssd_epi32(isum[t][j % A], w, Pair(x[t * x_stride + b], j));
        }
      }
    } else {
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m512i v = _mm512_load_si512(wb + 64 * c);
        __m512i w[4];
        w[0] = _mm512_and_si512(v, mask);
        w[1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
        w[2] = _mm512_and_si512(_mm512_srli_epi16(v, 8), mask);
        w[3] = _mm512_srli_epi16(v, 12);
#pragma GCC unroll 4
        for (int s = 0; s < 4; ++s) {
          const int j = 4 * c + s;
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            isum[t][j % A] =
                _mm512_dpwssd_epi32(isum[t][j % A], w[s], Pair(x[t * x_stride + b], j));
          }
        }
      }
    }
    const __m512 d = _mm512_cvtph_ps(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + (k8Bit ? 512 : 256))));
    const __m512 m = k8Bit ? _mm512_setzero_ps()
                           : _mm512_cvtph_ps(_mm256_load_si256(
                                 reinterpret_cast<const __m256i*>(wb + 288)));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      __m512i s = isum[t][0];
#pragma GCC unroll 4
      for (int a = 1; a < A; ++a) s = _mm512_add_epi32(s, isum[t][a]);
      acc[t] = Epilogue<!k8Bit>(s, d, m, x[t * x_stride + b], acc[t]);
    }
  }
  const __mmask16 keep = valid_rows >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << valid_rows) - 1);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(out + t * out_stride, keep, acc[t]);
}

template <bool k8Bit>
RILL_TARGET_VNNI void Group(const uint8_t* gw, size_t block_bytes, int64_t nb,
                            const BlockQ16* x, int64_t n, float* out, int64_t out_stride,
                            int valid_rows) {
  int64_t t = 0;
  for (; t + kMaxTokens <= n; t += kMaxTokens) {
    GroupTile<k8Bit, kMaxTokens, 1>(gw, block_bytes, nb, x + t * nb, nb, out + t * out_stride,
                                    out_stride, valid_rows);
  }
  const BlockQ16* xt = x + t * nb;
  float* o = out + t * out_stride;
  switch (n - t) {
    case 7: return GroupTile<k8Bit, 7, 1>(gw, block_bytes, nb, xt, nb, o, out_stride, valid_rows);
    case 6: return GroupTile<k8Bit, 6, 1>(gw, block_bytes, nb, xt, nb, o, out_stride, valid_rows);
    case 5: return GroupTile<k8Bit, 5, 1>(gw, block_bytes, nb, xt, nb, o, out_stride, valid_rows);
    case 4: return GroupTile<k8Bit, 4, 2>(gw, block_bytes, nb, xt, nb, o, out_stride, valid_rows);
    case 3: return GroupTile<k8Bit, 3, 2>(gw, block_bytes, nb, xt, nb, o, out_stride, valid_rows);
    case 2: return GroupTile<k8Bit, 2, 4>(gw, block_bytes, nb, xt, nb, o, out_stride, valid_rows);
    case 1: return GroupTile<k8Bit, 1, 4>(gw, block_bytes, nb, xt, nb, o, out_stride, valid_rows);
    default: return;
  }
}

}  // namespace

bool PackedKernelsAvailable() {
  static const bool has = DetectVnni();
  return has && UseAvx512();
}

namespace {

// Residual activations of a block: x - d q, what the int16 rounding lost.
RILL_TARGET_VNNI void Residual(const float* x, const BlockQ16* q, float* r, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 d = _mm512_set1_ps(q[b].d);
    for (int h = 0; h < 2; ++h) {
      const __m512 qi = _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[b].q + 16 * h))));
      _mm512_storeu_ps(r + 32 * b + 16 * h,
                       _mm512_fnmadd_ps(d, qi, _mm512_loadu_ps(x + 32 * b + 16 * h)));
    }
  }
}

void RunGroups(const PackedWeights& w, const BlockQ16* xq, int64_t n, float* y, ThreadPool* pool) {
  const int64_t nb = w.cols / 32;
  const bool eight = w.format == PackedWeights::Format::k8Bit;
  const size_t group_bytes = nb * w.block_bytes;
  internal::ForRowPieces(pool, w.groups, n, [&](int64_t gb, int64_t ge) {
    for (int64_t g = gb; g < ge; ++g) {
      const uint8_t* gw = w.data.data() + g * group_bytes;
      const int valid = static_cast<int>(std::min<int64_t>(16, w.rows - g * 16));
      float* out = y + g * 16;
      if (eight) {
        Group<true>(gw, w.block_bytes, nb, xq, n, out, w.rows, valid);
      } else {
        Group<false>(gw, w.block_bytes, nb, xq, n, out, w.rows, valid);
      }
    }
  });
}

}  // namespace

void PackedMatMul(const PackedWeights& w, const float* x, int64_t n_tokens, float* y,
                  ThreadPool* pool, const uint8_t* precise) {
  if (n_tokens <= 0) return;
  if (IsInterleavedFormat(w.format)) {
    const PackedWeights* ws[] = {&w};
    float* ys[] = {y};
    internal::InterleavedMatMul(ws, ys, 1, x, n_tokens, pool);
    return;
  }
  const int64_t nb = w.cols / 32;
  thread_local std::vector<BlockQ16> xq;
  xq.resize(n_tokens * nb);
  BlockQ16* xqd = xq.data();
  ParallelFor(pool, n_tokens, 16, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) QuantizeRow(x + t * w.cols, xqd + t * nb, nb);
  });
  RunGroups(w, xqd, n_tokens, y, pool);
  if (precise == nullptr) return;
  thread_local std::vector<int64_t> hard;
  hard.clear();
  for (int64_t t = 0; t < n_tokens; ++t) {
    if (precise[t]) hard.push_back(t);
  }
  if (hard.empty()) return;
  // Second pass: the residuals of those tokens, added to their outputs.
  std::vector<float> r(hard.size() * w.cols);
  std::vector<BlockQ16> rq(hard.size() * nb);
  for (size_t i = 0; i < hard.size(); ++i) {
    Residual(x + hard[i] * w.cols, xqd + hard[i] * nb, r.data() + i * w.cols, nb);
    QuantizeRow(r.data() + i * w.cols, rq.data() + i * nb, nb);
  }
  std::vector<float> yr(hard.size() * w.rows);
  RunGroups(w, rq.data(), hard.size(), yr.data(), pool);
  for (size_t i = 0; i < hard.size(); ++i) {
    for (int64_t o = 0; o < w.rows; ++o) y[hard[i] * w.rows + o] += yr[i * w.rows + o];
  }
}

}  // namespace rill::kernels::cpu
