// Host API of the CUDA kernels for the Llama forward. Plain C++ only (no absl,
// glog or CUDA headers) so CMake can build it on a bare GPU box. Pointers are
// device pointers; bf16 tensors are passed as void* (__nv_bfloat16 on the
// device, uint16_t bit patterns on the host). All launches are asynchronous on
// `stream` and return 0 or a cudaError_t (see cuda_runtime_api.h); argument
// errors return cudaErrorInvalidValue (1) before launching.
//
// KV cache layout (per layer, K and V each): [num_blocks][block_size][kv_heads][head_dim].
#ifndef RILL_KERNELS_CUDA_CUDA_KERNELS_H_
#define RILL_KERNELS_CUDA_CUDA_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_runtime_api.h"

namespace rill::kernels::cuda {

// residual[r] += x[r] (skipped when x is null), then
// out[r] = residual[r] / rms(residual[r]) * weight. Rows of `hidden` elements.
int RmsNormResidual(const void* x, void* residual, const void* weight, void* out, int rows,
                    int hidden, float eps, Stream stream);

// In-place rotary embedding of q [tokens][q_heads][head_dim] and k
// [tokens][kv_heads][head_dim]. inv_freq has rotary_dim / 2 floats (any
// scaling, e.g. Llama-3 or YaRN, is folded into it by the host). neox pairs
// element i with i + rotary_dim/2; otherwise 2i with 2i+1 (GPT-J style).
int Rope(void* q, void* k, const int32_t* positions, const float* inv_freq, int tokens, int q_heads,
         int kv_heads, int head_dim, int rotary_dim, bool neox, Stream stream);

// out[r][i] = silu(gate_up[r][i]) * gate_up[r][ffn + i].
int SwiGlu(const void* gate_up, void* out, int rows, int ffn, Stream stream);

// out[i] = gelu_tanh(in[i]).
int Gelu(const void* in, void* out, int64_t n, Stream stream);

// out[t] = table[tokens[t]]; ids outside [0, vocab) give a zero row.
int EmbeddingLookup(const int32_t* tokens, const void* table, void* out, int n, int hidden,
                    int vocab, Stream stream);

// Writes token t's K/V rows to cache slot slot_mapping[t] (block * block_size
// + offset); negative slots (padding) are skipped.
int KvCacheWrite(const void* k, const void* v, void* k_cache, void* v_cache,
                 const int32_t* slot_mapping, int tokens, int kv_heads, int head_dim,
                 Stream stream);

struct PagedAttentionShape {
  int q_heads = 0;
  int kv_heads = 0;  // divides q_heads (GQA)
  int head_dim = 0;  // <= 128
  int block_size = 16;
  int max_blocks_per_seq = 0;  // row stride of block_tables
  float scale = 0.0f;          // 0: 1/sqrt(head_dim)
};

// Decode: one query token per sequence, q/out [seqs][q_heads][head_dim].
// Contexts are split into partitions of `partition_size` keys, each handled
// by its own thread block, then merged (split-K) so long contexts use the
// whole GPU. workspace needs DecodeWorkspaceFloats(...) floats.
size_t DecodeWorkspaceFloats(int seqs, const PagedAttentionShape& shape, int max_context,
                             int partition_size);
int PagedAttentionDecode(const void* q, const void* k_cache, const void* v_cache,
                         const int32_t* block_tables, const int32_t* context_lens, void* out,
                         float* workspace, int seqs, int max_context, int partition_size,
                         const PagedAttentionShape& shape, Stream stream);

// Prefill (ragged, chunked, causal): sequence s owns query tokens
// [query_start[s], query_start[s+1]) which are the last tokens of its
// context_lens[s] cached tokens, so query i of a chunk of n sees keys at
// positions <= context_len - n + i. q/out [total_tokens][q_heads][head_dim].
int PagedAttentionPrefill(const void* q, const void* k_cache, const void* v_cache,
                          const int32_t* block_tables, const int32_t* query_start,
                          const int32_t* context_lens, void* out, int seqs, int total_tokens,
                          const PagedAttentionShape& shape, Stream stream);

// Per-row sampling settings. temperature <= 0: greedy (argmax, lowest id on
// ties). top_k <= 0 and top_p >= 1 and min_p <= 0 disable those filters.
struct SamplingParams {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;  // per request
  uint64_t step = 0;  // tokens generated so far: a new draw per step
  // In [0, 1): the draw's uniform, given by the caller (the serving engine
  // takes it from the request's own generator, so a request's random stream
  // is the host sampler's). Negative: SampleUniform(seed, step).
  double uniform = -1.0;
  // Nonzero: the inverse-CDF draw walks the kept tokens by logit, highest
  // first (ties: lower id first), as the host sampler does when top_k
  // filters (worker/sampler.h DrawOrderOf); zero: in vocabulary order.
  int32_t descending = 0;
};

// logits [rows][vocab] float; params is a device array of `rows` entries.
int Sample(const float* logits, const SamplingParams* params, int32_t* tokens, int rows, int vocab,
           Stream stream);

// A sparse change of one logit before sampling (repetition / presence /
// frequency penalties, logit_bias, min_tokens masking), applied in this
// order: l = repetition != 1 ? (l > 0 ? l / repetition : l * repetition) : l;
// l -= subtract; l += add; mask != 0: l = -inf.
struct LogitEdit {
  int32_t token = 0;
  float repetition = 1.0f;
  float subtract = 0.0f;
  float add = 0.0f;
  int32_t mask = 0;
};

// Applies row r's edits edits[offsets[r], offsets[r + 1]) to logits[r] in
// place. A token appears at most once per row; out-of-range tokens are
// skipped.
int ApplyLogitEdits(float* logits, const LogitEdit* edits, const int32_t* offsets, int rows,
                    int vocab, Stream stream);

// The k[r] most likely tokens of row r (k[r] <= max_k <= kMaxTopLogprobs;
// 0: none), best first, ties to the lower id (NaN as -inf), with their
// log-softmax values: ids and logprobs are [rows][max_k], entries past k[r]
// untouched. The host's order (engine TopKLogprobs).
constexpr int kMaxTopLogprobs = 32;
int TopLogprobs(const float* logits, const int32_t* k, int32_t* ids, float* logprobs, int rows,
                int vocab, int max_k, Stream stream);

// logprobs[r] = log_softmax(logits[r])[tokens[r]] (the unprocessed distribution).
int Logprobs(const float* logits, const int32_t* tokens, float* logprobs, int rows, int vocab,
             Stream stream);

// Splits a fused projection qkv [tokens][q_dim + 2 * kv_dim] (q columns, then
// k, then v) into contiguous q [tokens][q_dim], k and v [tokens][kv_dim],
// adding bias [q_dim + 2 * kv_dim] first when it is not null (Qwen2).
int SplitQkv(const void* qkv, const void* bias, void* q, void* k, void* v, int tokens, int q_dim,
             int kv_dim, Stream stream);

// GEMMs through cuBLAS; the handle and its workspace are made once per
// context (they must exist before CUDA-graph capture).
struct GemmContext;
int GemmCreate(Stream stream, GemmContext** ctx);
void GemmDestroy(GemmContext* ctx);
// y[m][n] = x[m][k] . w[n][k]^T: bf16 x and w (weights row-major [out][in]),
// FP32 accumulation, y bf16 (y_is_f32 false) or float (for logits).
int Gemm(GemmContext* ctx, const void* x, const void* w, void* y, int m, int n, int k,
         bool y_is_f32);

}  // namespace rill::kernels::cuda

#endif  // RILL_KERNELS_CUDA_CUDA_KERNELS_H_
