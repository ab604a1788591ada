// Paged attention over the block-table KV cache: split-K decode and ragged,
// chunked, causal prefill. One 128-thread block per (query, head[, partition]);
// thread d owns output dim d, keys are scored 128 at a time with an online
// softmax so any context length runs in fixed shared memory.
#include "kernels/cuda/cuda_device_common.h"
#include "kernels/cuda/cuda_kernels.h"

namespace rill::kernels::cuda {
namespace {

using internal::bf16;
using internal::ToB;
using internal::ToF;

constexpr int kThreads = 128;  // also the largest head_dim and the key chunk

struct Geometry {
  const bf16* k_cache;
  const bf16* v_cache;
  int kv_heads, head_dim, block_size;
  float scale;
};

__device__ __forceinline__ size_t Row(const Geometry& g, const int32_t* table, int key,
                                      int kv_head) {
  const int blk = table[key / g.block_size];
  return ((static_cast<size_t>(blk) * g.block_size + key % g.block_size) * g.kv_heads + kv_head) *
         g.head_dim;
}

// Folds keys [start, end) into the running (acc, m, l) of this thread's dim.
__device__ void AttendRange(const Geometry& g, const float* q_sh, const int32_t* table, int kv_head,
                            int start, int end, float* p_sh, float* scratch, float& acc, float& m,
                            float& l) {
  const int d = threadIdx.x;
  for (int c0 = start; c0 < end; c0 += kThreads) {
    const int key = c0 + threadIdx.x;
    float s = -FLT_MAX;
    if (key < end) {
      const bf16* kr = g.k_cache + Row(g, table, key, kv_head);
      float dot = 0.0f;
      for (int i = 0; i < g.head_dim; ++i) dot += q_sh[i] * ToF(kr[i]);
      s = dot * g.scale;
    }
    const float new_m = fmaxf(m, internal::BlockMax(s, scratch));
    const float p = key < end ? __expf(s - new_m) : 0.0f;
    p_sh[threadIdx.x] = p;
    const float psum = internal::BlockSum(p, scratch);  // its barriers publish p_sh
    const float corr = __expf(m - new_m);
    l = l * corr + psum;
    acc *= corr;
    const int n = min(kThreads, end - c0);
    if (d < g.head_dim) {
      for (int j = 0; j < n; ++j)
        acc += p_sh[j] * ToF(g.v_cache[Row(g, table, c0 + j, kv_head) + d]);
    }
    m = new_m;
    __syncthreads();  // p_sh is rewritten by the next chunk
  }
}

__device__ void LoadQuery(const bf16* q, int head_dim, float* q_sh) {
  if (threadIdx.x < head_dim) q_sh[threadIdx.x] = ToF(q[threadIdx.x]);
  __syncthreads();
}

// grid (q_heads, seqs, partitions). Workspace per (seq, head, partition):
// head_dim unnormalized outputs, then the running max and the exp-sum.
__global__ void __launch_bounds__(kThreads)
    DecodePartitionKernel(Geometry g, const bf16* q, const int32_t* tables, const int32_t* ctx_lens,
                          float* ws, int max_blocks, int partition_size) {
  __shared__ float q_sh[kThreads], p_sh[kThreads], scratch[33];
  const int head = blockIdx.x, seq = blockIdx.y, part = blockIdx.z, q_heads = gridDim.x;
  const int kv_head = head / (q_heads / g.kv_heads);
  float* w =
      ws + ((static_cast<size_t>(seq) * q_heads + head) * gridDim.z + part) * (g.head_dim + 2);
  const int ctx = ctx_lens[seq];
  const int start = part * partition_size, end = min(ctx, start + partition_size);
  float acc = 0.0f, m = -FLT_MAX, l = 0.0f;
  if (start < end) {
    LoadQuery(q + (static_cast<size_t>(seq) * q_heads + head) * g.head_dim, g.head_dim, q_sh);
    AttendRange(g, q_sh, tables + static_cast<size_t>(seq) * max_blocks, kv_head, start, end, p_sh,
                scratch, acc, m, l);
  }
  if (threadIdx.x < g.head_dim) w[threadIdx.x] = acc;
  if (threadIdx.x == 0) {
    w[g.head_dim] = m;
    w[g.head_dim + 1] = l;
  }
}

// grid (q_heads, seqs): merges the partitions with their max/sum rescaling.
__global__ void DecodeMergeKernel(const float* ws, bf16* out, int head_dim, int parts) {
  const int head = blockIdx.x, seq = blockIdx.y, q_heads = gridDim.x;
  const float* w = ws + (static_cast<size_t>(seq) * q_heads + head) * parts * (head_dim + 2);
  float gm = -FLT_MAX;
  for (int p = 0; p < parts; ++p) gm = fmaxf(gm, w[p * (head_dim + 2) + head_dim]);
  const int d = threadIdx.x;
  if (d >= head_dim) return;
  float num = 0.0f, den = 0.0f;
  for (int p = 0; p < parts; ++p) {
    const float* wp = w + p * (head_dim + 2);
    if (wp[head_dim + 1] == 0.0f) continue;
    const float f = __expf(wp[head_dim] - gm);
    num += wp[d] * f;
    den += wp[head_dim + 1] * f;
  }
  out[(static_cast<size_t>(seq) * q_heads + head) * head_dim + d] = ToB(den > 0 ? num / den : 0.0f);
}

// grid (q_heads, total_tokens).
__global__ void __launch_bounds__(kThreads)
    PrefillKernel(Geometry g, const bf16* q, const int32_t* tables, const int32_t* query_start,
                  const int32_t* ctx_lens, bf16* out, int seqs, int max_blocks) {
  __shared__ float q_sh[kThreads], p_sh[kThreads], scratch[33];
  const int head = blockIdx.x, t = blockIdx.y, q_heads = gridDim.x;
  int lo = 0, hi = seqs - 1;  // last sequence whose first query token is <= t
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (query_start[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int seq = lo;
  const int n = query_start[seq + 1] - query_start[seq], i = t - query_start[seq];
  const int end = ctx_lens[seq] - n + i + 1;
  const int kv_head = head / (q_heads / g.kv_heads);
  const size_t qo = (static_cast<size_t>(t) * q_heads + head) * g.head_dim;
  LoadQuery(q + qo, g.head_dim, q_sh);
  float acc = 0.0f, m = -FLT_MAX, l = 0.0f;
  AttendRange(g, q_sh, tables + static_cast<size_t>(seq) * max_blocks, kv_head, 0, end, p_sh,
              scratch, acc, m, l);
  if (threadIdx.x < g.head_dim) out[qo + threadIdx.x] = ToB(l > 0 ? acc / l : 0.0f);
}

bool ShapeOk(const PagedAttentionShape& s) {
  return s.q_heads > 0 && s.kv_heads > 0 && s.q_heads % s.kv_heads == 0 && s.head_dim > 0 &&
         s.head_dim <= kThreads && s.block_size > 0 && s.max_blocks_per_seq > 0;
}

Geometry MakeGeometry(const void* k, const void* v, const PagedAttentionShape& s) {
  return {static_cast<const bf16*>(k),
          static_cast<const bf16*>(v),
          s.kv_heads,
          s.head_dim,
          s.block_size,
          s.scale > 0 ? s.scale : 1.0f / sqrtf(static_cast<float>(s.head_dim))};
}

int Partitions(int max_context, int partition_size) {
  return max_context <= 0 ? 1 : (max_context + partition_size - 1) / partition_size;
}

}  // namespace

size_t DecodeWorkspaceFloats(int seqs, const PagedAttentionShape& shape, int max_context,
                             int partition_size) {
  if (partition_size <= 0) return 0;
  return static_cast<size_t>(seqs) * shape.q_heads * Partitions(max_context, partition_size) *
         (shape.head_dim + 2);
}

int PagedAttentionDecode(const void* q, const void* k_cache, const void* v_cache,
                         const int32_t* block_tables, const int32_t* context_lens, void* out,
                         float* workspace, int seqs, int max_context, int partition_size,
                         const PagedAttentionShape& shape, Stream stream) {
  if (!ShapeOk(shape) || seqs < 0 || seqs > 65535 || partition_size <= 0 || max_context < 0 ||
      max_context > shape.max_blocks_per_seq * shape.block_size) {
    return internal::kInvalid;
  }
  if (seqs == 0) return 0;
  const int parts = Partitions(max_context, partition_size);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  DecodePartitionKernel<<<dim3(shape.q_heads, seqs, parts), kThreads, 0, s>>>(
      MakeGeometry(k_cache, v_cache, shape), static_cast<const bf16*>(q), block_tables,
      context_lens, workspace, shape.max_blocks_per_seq, partition_size);
  DecodeMergeKernel<<<dim3(shape.q_heads, seqs), kThreads, 0, s>>>(
      workspace, static_cast<bf16*>(out), shape.head_dim, parts);
  return internal::LaunchStatus();
}

int PagedAttentionPrefill(const void* q, const void* k_cache, const void* v_cache,
                          const int32_t* block_tables, const int32_t* query_start,
                          const int32_t* context_lens, void* out, int seqs, int total_tokens,
                          const PagedAttentionShape& shape, Stream stream) {
  if (!ShapeOk(shape) || seqs <= 0 || total_tokens < 0 || total_tokens > 65535) {
    return internal::kInvalid;  // grid.y limit: the caller chunks longer prefills
  }
  if (total_tokens == 0) return 0;
  PrefillKernel<<<dim3(shape.q_heads, total_tokens), kThreads, 0,
                  static_cast<cudaStream_t>(stream)>>>(
      MakeGeometry(k_cache, v_cache, shape), static_cast<const bf16*>(q), block_tables, query_start,
      context_lens, static_cast<bf16*>(out), seqs, shape.max_blocks_per_seq);
  return internal::LaunchStatus();
}

}  // namespace rill::kernels::cuda
