// Elementwise and normalisation ops on float buffers. All accept out == x
// (in place). AVX2 paths are chosen at run time (see cpu_features.h).
#ifndef RILL_KERNELS_CPU_OPS_H_
#define RILL_KERNELS_CPU_OPS_H_

#include <cstdint>

namespace rill::kernels::cpu {

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for n_rows rows of dim.
// weight may be null (no scale).
void RmsNorm(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps,
             float* out);

// out[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias (biased
// variance, as torch). weight / bias may be null.
void LayerNorm(const float* x, const float* weight, const float* bias, int64_t n_rows,
               int64_t dim, float eps, float* out);

// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);

// GPT-2 "gelu_new": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void Gelu(const float* x, int64_t n, float* out);

// In-place softmax of one row of n (n >= 1). Entries of -inf get 0.
void Softmax(float* x, int64_t n);

// log(sum_i exp(x[i])) for n >= 1, shifted by the max for stability, with
// float exps summed in double (the log-softmax denominator of a vocabulary
// row). Deterministic: depends only on x and n. -inf if every x[i] is -inf.
float LogSumExp(const float* x, int64_t n);

// LogSumExp when the caller already has max = the largest x[i] (NaNs
// skipped, as ArgMax finds it): the same value without a second scan.
float LogSumExpGivenMax(const float* x, int64_t n, float max);

// out[i] = exp((x[i] - shift) * scale) for n >= 0 (scale > 0); exactly 0
// where x[i] is -inf (a masked token stays impossible). The unnormalised
// probabilities of temperature sampling. Returns their sum, accumulated in
// double (deterministic: depends only on the inputs). The exps are bitwise
// the same at every vector width.
double ExpShiftedScaled(const float* x, int64_t n, float shift, float scale, float* out);

// The draw of inverse-CDF sampling over unnormalised weights p[0, n) (each
// >= 0): the first i with p[0] + ... + p[i] > r, summed in double, for
// 0 <= r < their total. Where rounding leaves the running sum at or below r
// past the end, the last i with p[i] > 0; -1 when every p[i] is 0.
int64_t CumulativeSearch(const float* p, int64_t n, double r);

// The first i in [0, n) with x[i] > threshold, or n.
int64_t FirstAbove(const float* x, int64_t n, float threshold);

// sums[k] = the sum of the p[i] >= thresholds[k], for k < 4, in one pass:
// runs of 256 values are summed in float, then in double, so each sum is
// within ~1e-6 relative (deterministic: depends only on the inputs).
void SumsAtLeast(const float* p, int64_t n, const float (&thresholds)[4], double (&sums)[4]);

// Writes to out (room for n) every i in [0, n) with p[i] >= threshold, in
// increasing order, and returns how many (the candidates a sampling filter
// keeps).
int64_t IdsAtLeast(const float* p, int64_t n, float threshold, int32_t* out);

// The same for lo <= p[i] < hi (no upper bound where hi is +inf).
int64_t IdsInRange(const float* p, int64_t n, float lo, float hi, int32_t* out);

// Index of the largest x[i] (n >= 1); ties go to the lowest index, so the
// result never depends on how the scan is split. NaNs are never chosen
// unless every entry is NaN (then 0).
int64_t ArgMax(const float* x, int64_t n);

// out = a + b.
void Add(const float* a, const float* b, int64_t n, float* out);

// out = a * s.
void Scale(const float* a, float s, int64_t n, float* out);

enum class RopeLayout {
  kInterleaved,  // pairs (x[2i], x[2i+1]) (GPT-J / llama.cpp "normal")
  kNeox,         // pairs (x[i], x[i + rot_dim/2]) (rotate_half, HF llama)
};

// Rotates, in place, the first rot_dim (even, <= head_dim) features of each
// head of x, laid out [n_tokens][token_stride] with head h of token t at
// x + t * token_stride + h * head_dim. Pair i of token t turns by angle
// positions[t] * inv_freq[i] (inv_freq has rot_dim / 2 entries, precomputed
// by the caller so it can apply rope scaling); cos/sin are multiplied by
// mscale (1 for plain RoPE; YaRN's attention factor otherwise).
void Rope(float* x, int64_t n_tokens, int64_t token_stride, int64_t n_heads, int64_t head_dim,
          int64_t rot_dim, const int32_t* positions, const float* inv_freq, RopeLayout layout,
          float mscale = 1.0f);

}  // namespace rill::kernels::cpu

#endif  // RILL_KERNELS_CPU_OPS_H_
