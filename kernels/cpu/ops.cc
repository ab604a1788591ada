#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <glog/logging.h>

#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/cpu_features.h"

namespace rill::cpu {
namespace {

using internal::ExpPs;
using internal::HmaxPs8;
using internal::HsumPs8;

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

// ---- scalar ----

void RmsNormScalar(const float* x, const float* w, int64_t dim, float eps, float* out) {
  float ss = 0.0f;
  for (int64_t i = 0; i < dim; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / dim + eps);
  for (int64_t i = 0; i < dim; ++i) out[i] = x[i] * inv * (w ? w[i] : 1.0f);
}

void SwiGluScalar(const float* g, const float* u, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void GeluScalar(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + std::tanh(kGeluC * (v + kGeluA * v * v * v)));
  }
}

void SoftmaxScalar(float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  const float inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// ---- AVX2 ----

RILL_TARGET_AVX2 void RmsNormAvx2(const float* x, const float* w, int64_t dim, float eps,
                                  float* out) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= dim; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  float ss = HsumPs8(acc);
  for (; i < dim; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / dim + eps);
  const __m256 vinv = _mm256_set1_ps(inv);
  i = 0;
  for (; i + 8 <= dim; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
    if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(out + i, v);
  }
  for (; i < dim; ++i) out[i] = x[i] * inv * (w ? w[i] : 1.0f);
}

RILL_TARGET_AVX2 void SwiGluAvx2(const float* g, const float* u, int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(g + i);
    const __m256 e = ExpPs(_mm256_sub_ps(zero, v));
    const __m256 s = _mm256_div_ps(v, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
  }
  SwiGluScalar(g + i, u + i, n - i, out + i);
}

RILL_TARGET_AVX2 void GeluAvx2(const float* x, int64_t n, float* out) {
  // 0.5 (1 + tanh(z)) = 1 / (1 + exp(-2z)).
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 c2 = _mm256_set1_ps(-2.0f * kGeluC);
  const __m256 a = _mm256_set1_ps(kGeluA);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(a, v), _mm256_mul_ps(v, v), v);
    const __m256 e = ExpPs(_mm256_mul_ps(c2, inner));
    _mm256_storeu_ps(out + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
  }
  GeluScalar(x + i, n - i, out + i);
}

RILL_TARGET_AVX2 void SoftmaxAvx2(float* x, int64_t n) {
  __m256 vm = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
  float m = HmaxPs8(vm);
  for (; i < n; ++i) m = std::max(m, x[i]);
  const __m256 vmax = _mm256_set1_ps(m);
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 acc = _mm256_setzero_ps();
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    __m256 e = ExpPs(_mm256_sub_ps(v, vmax));
    e = _mm256_andnot_ps(_mm256_cmp_ps(v, neg_inf, _CMP_EQ_OQ), e);  // exact 0 for -inf
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float s = HsumPs8(acc);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  const float inv = 1.0f / s;
  const __m256 vinv = _mm256_set1_ps(inv);
  i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
  for (; i < n; ++i) x[i] *= inv;
}

RILL_TARGET_AVX2 double SumExpShiftedAvx2(const float* x, int64_t n, float m) {
  const __m256 vmax = _mm256_set1_ps(m);
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = ExpPs(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(acc0, acc1));
  double s = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) s += std::exp(static_cast<double>(x[i] - m));
  return s;
}

RILL_TARGET_AVX2 void ExpShiftedScaledAvx2(const float* x, int64_t n, float shift, float scale,
                                           float* out) {
  const __m256 vs = _mm256_set1_ps(shift), vk = _mm256_set1_ps(scale);
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 e = ExpPs(_mm256_mul_ps(_mm256_sub_ps(v, vs), vk));
    // ExpPs floors at ~1e-38; a -inf logit must give exactly 0.
    _mm256_storeu_ps(out + i, _mm256_andnot_ps(_mm256_cmp_ps(v, ninf, _CMP_EQ_OQ), e));
  }
  for (; i < n; ++i) out[i] = std::exp((x[i] - shift) * scale);
}

RILL_TARGET_AVX2 float MaxAvx2(const float* x, int64_t n) {
  __m256 vm = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  // max_ps returns its second operand when either is NaN: NaNs are skipped.
  for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(_mm256_loadu_ps(x + i), vm);
  float m = HmaxPs8(vm);
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

RILL_TARGET_AVX2 int64_t FirstEqualAvx2(const float* x, int64_t n, float v) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vv, _CMP_EQ_OQ));
    if (mask != 0) return i + __builtin_ctz(mask);
  }
  for (; i < n; ++i) {
    if (x[i] == v) return i;
  }
  return 0;
}

RILL_TARGET_AVX2 void AddAvx2(const float* a, const float* b, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace

void RmsNorm(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps,
             float* out) {
  const bool avx2 = UseAvx2();
  for (int64_t r = 0; r < n_rows; ++r) {
    if (avx2) {
      RmsNormAvx2(x + r * dim, weight, dim, eps, out + r * dim);
    } else {
      RmsNormScalar(x + r * dim, weight, dim, eps, out + r * dim);
    }
  }
}

void LayerNorm(const float* x, const float* weight, const float* bias, int64_t n_rows,
               int64_t dim, float eps, float* out) {
  // Cheap relative to the matmuls around it; double sums keep the variance
  // exact enough for large-mean rows.
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    double mean = 0.0;
    for (int64_t i = 0; i < dim; ++i) mean += xr[i];
    mean /= dim;
    double var = 0.0;
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= dim;
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float mf = static_cast<float>(mean);
    for (int64_t i = 0; i < dim; ++i) {
      o[i] = (xr[i] - mf) * inv * (weight ? weight[i] : 1.0f) + (bias ? bias[i] : 0.0f);
    }
  }
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  UseAvx2() ? SwiGluAvx2(gate, up, n, out) : SwiGluScalar(gate, up, n, out);
}

void Gelu(const float* x, int64_t n, float* out) {
  UseAvx2() ? GeluAvx2(x, n, out) : GeluScalar(x, n, out);
}

void Softmax(float* x, int64_t n) {
  DCHECK_GE(n, 1);
  UseAvx2() ? SoftmaxAvx2(x, n) : SoftmaxScalar(x, n);
}

int64_t ArgMax(const float* x, int64_t n) {
  DCHECK_GE(n, 1);
  if (UseAvx2()) return FirstEqualAvx2(x, n, MaxAvx2(x, n));
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;
  }
  return best;
}

void ExpShiftedScaled(const float* x, int64_t n, float shift, float scale, float* out) {
  if (UseAvx2()) return ExpShiftedScaledAvx2(x, n, shift, scale, out);
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp((x[i] - shift) * scale);
}

float LogSumExp(const float* x, int64_t n) {
  DCHECK_GE(n, 1);
  // Vectorised max where it can (the scalar scan was most of a greedy
  // sample's cost); NaNs are skipped either way.
  const float m = UseAvx2() ? MaxAvx2(x, n) : *std::max_element(x, x + n);
  if (m == -std::numeric_limits<float>::infinity()) return m;
  double s = 0.0;
  if (UseAvx2()) {
    s = SumExpShiftedAvx2(x, n, m);
  } else {
    for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i] - m));
  }
  return m + static_cast<float>(std::log(s));
}

void Add(const float* a, const float* b, int64_t n, float* out) {
  if (UseAvx2()) return AddAvx2(a, b, n, out);
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void Scale(const float* a, float s, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * s;
}

void Rope(float* x, int64_t n_tokens, int64_t token_stride, int64_t n_heads, int64_t head_dim,
          int64_t rot_dim, const int32_t* positions, const float* inv_freq, RopeLayout layout,
          float mscale) {
  CHECK_EQ(rot_dim % 2, 0);
  CHECK_LE(rot_dim, head_dim);
  const int64_t half = rot_dim / 2;
  // cos/sin per (token, pair), kept for the next call: every layer (and q
  // and k) of a forward pass rotates the same positions with the same
  // frequencies, and the sin/cos cost more than the rotation.
  struct Table {
    std::vector<int32_t> positions;
    std::vector<float> inv_freq;
    float mscale = 0.0f;
    std::vector<float> cs;  // [token][cos half, sin half]
  };
  thread_local Table table;
  if (table.mscale != mscale || table.inv_freq.size() != static_cast<size_t>(half) ||
      table.positions.size() != static_cast<size_t>(n_tokens) ||
      !std::equal(inv_freq, inv_freq + half, table.inv_freq.begin()) ||
      !std::equal(positions, positions + n_tokens, table.positions.begin())) {
    table.positions.assign(positions, positions + n_tokens);
    table.inv_freq.assign(inv_freq, inv_freq + half);
    table.mscale = mscale;
    table.cs.resize(n_tokens * 2 * half);
    for (int64_t t = 0; t < n_tokens; ++t) {
      float* c = table.cs.data() + t * 2 * half;
      // Angles in double: positions reach 1e5+ where float products lose bits.
      for (int64_t i = 0; i < half; ++i) {
        const double a = static_cast<double>(positions[t]) * inv_freq[i];
        c[i] = static_cast<float>(std::cos(a)) * mscale;
        c[half + i] = static_cast<float>(std::sin(a)) * mscale;
      }
    }
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* cos_t = table.cs.data() + t * 2 * half;
    const float* sin_t = cos_t + half;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + t * token_stride + h * head_dim;
      if (layout == RopeLayout::kInterleaved) {
        for (int64_t i = 0; i < half; ++i) {
          const float x0 = v[2 * i], x1 = v[2 * i + 1];
          v[2 * i] = x0 * cos_t[i] - x1 * sin_t[i];
          v[2 * i + 1] = x0 * sin_t[i] + x1 * cos_t[i];
        }
      } else {
        for (int64_t i = 0; i < half; ++i) {
          const float x0 = v[i], x1 = v[i + half];
          v[i] = x0 * cos_t[i] - x1 * sin_t[i];
          v[i + half] = x0 * sin_t[i] + x1 * cos_t[i];
        }
      }
    }
  }
}

}  // namespace rill::cpu
