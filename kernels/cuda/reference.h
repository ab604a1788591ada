// Plain C++ float reference implementations of the CUDA kernels (same
// layouts and semantics as cuda_kernels.h, host memory, bf16 as uint16_t).
// The checker compares the GPU against these; they need no CUDA.
#ifndef RILL_KERNELS_CUDA_REFERENCE_H_
#define RILL_KERNELS_CUDA_REFERENCE_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"

namespace rill::kernels::cuda::ref {

using Bf16 = uint16_t;

float ToFloat(Bf16 b);
Bf16 ToBf16(float f);  // round to nearest even; NaN stays NaN
std::vector<float> ToFloat(const std::vector<Bf16>& v);
std::vector<Bf16> ToBf16(const std::vector<float>& v);

void RmsNormResidual(const Bf16* x, Bf16* residual, const Bf16* weight, Bf16* out, int rows,
                     int hidden, float eps);
void Rope(Bf16* q, Bf16* k, const int32_t* positions, const float* inv_freq, int tokens,
          int q_heads, int kv_heads, int head_dim, int rotary_dim, bool neox);
void SwiGlu(const Bf16* gate_up, Bf16* out, int rows, int ffn);
void Gelu(const Bf16* in, Bf16* out, int64_t n);
void EmbeddingLookup(const int32_t* tokens, const Bf16* table, Bf16* out, int n, int hidden,
                     int vocab);
void KvCacheWrite(const Bf16* k, const Bf16* v, Bf16* k_cache, Bf16* v_cache,
                  const int32_t* slot_mapping, int tokens, int kv_heads, int head_dim);
// One query over keys [0, end) of a sequence's paged cache; out in float.
void Attend(const Bf16* q, const Bf16* k_cache, const Bf16* v_cache, const int32_t* block_table,
            int end, int head, const PagedAttentionShape& s, float* out);
void PagedAttentionDecode(const Bf16* q, const Bf16* k_cache, const Bf16* v_cache,
                          const int32_t* block_tables, const int32_t* context_lens, float* out,
                          int seqs, const PagedAttentionShape& s);
void PagedAttentionPrefill(const Bf16* q, const Bf16* k_cache, const Bf16* v_cache,
                           const int32_t* block_tables, const int32_t* query_start,
                           const int32_t* context_lens, float* out, int seqs,
                           const PagedAttentionShape& s);
void SplitQkv(const Bf16* qkv, const Bf16* bias, Bf16* q, Bf16* k, Bf16* v, int tokens, int q_dim,
              int kv_dim);
// y[m][n] = x[m][k] . w[n][k]^T in float.
void Gemm(const Bf16* x, const Bf16* w, float* y, int m, int n, int k);

// Sampling with the CUDA sampler's rules: logits / temperature; keep tokens
// whose scaled logit is >= the top_k-th largest; then exp(l - max) >= min_p;
// then the highest tokens whose mass reaches top_p of what is left; draw
// u = (p.uniform if >= 0, else SampleUniform(seed, step)) * kept mass and
// take the first token in vocabulary order (p.descending: in descending
// logit order, ties by id) whose running mass exceeds u.
// kept (optional) gets the final keep mask.
int32_t Sample(const float* logits, const SamplingParams& p, int vocab,
               std::vector<bool>* kept = nullptr);
float Logprob(const float* logits, int32_t token, int vocab);
void ApplyLogitEdits(float* logits, const LogitEdit* edits, const int32_t* offsets, int rows,
                     int vocab);
// One row of TopLogprobs: the k best (id, log-softmax) pairs, best first.
std::vector<std::pair<int32_t, float>> TopLogprobs(const float* logits, int k, int vocab);

}  // namespace rill::kernels::cuda::ref

#endif  // RILL_KERNELS_CUDA_REFERENCE_H_
