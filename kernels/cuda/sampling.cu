// Sampling and logprobs on the GPU, one 1024-thread block per row. Top-k and
// top-p thresholds are found exactly by bisection on order-preserving float
// keys (32 block reductions each) instead of sorting the vocabulary.
#include "kernels/cuda/cuda_device_common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/sampling_rng.h"

namespace rill::kernels::cuda {
namespace {

constexpr int kThreads = 1024;

// Argmax with the lowest index on ties; NaN logits never win.
__device__ int BlockArgmax(const float* lg, int vocab) {
  __shared__ float best_v[32];
  __shared__ int best_i[32];
  float v = -INFINITY;
  int idx = vocab;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (lg[i] > v) {  // strided ascending order keeps the first maximum
      v = lg[i];
      idx = i;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > v || (ov == v && oi < idx)) {
      v = ov;
      idx = oi;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) {
    best_v[warp] = v;
    best_i[warp] = idx;
  }
  __syncthreads();
  if (warp == 0) {
    v = lane < (blockDim.x >> 5) ? best_v[lane] : -INFINITY;
    idx = lane < (blockDim.x >> 5) ? best_i[lane] : vocab;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, v, o);
      const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
      if (ov > v || (ov == v && oi < idx)) {
        v = ov;
        idx = oi;
      }
    }
    if (lane == 0) best_i[0] = idx;
  }
  __syncthreads();
  const int r = best_i[0];
  return r < vocab ? r : 0;
}

struct RowView {
  const float* lg;
  int vocab;
  float temperature, m;  // m: max scaled logit
  uint32_t k_key, p_key;
  float min_p;
  __device__ float Scaled(int i) const { return lg[i] / temperature; }
  __device__ bool KeepKMin(int i, float& p) const {
    const float l = Scaled(i);
    p = __expf(l - m);
    return OrderedKey(l) >= k_key && p >= min_p;
  }
};

// Largest key t with reduce(t) >= target, reduce non-increasing in t.
template <typename F>
__device__ uint32_t Bisect(F reduce, float target) {
  uint32_t lo = 0, hi = 0xFFFFFFFFu;
  while (lo < hi) {
    const uint32_t mid = lo + static_cast<uint32_t>((static_cast<uint64_t>(hi) - lo + 1) / 2);
    if (reduce(mid) >= target)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__global__ void __launch_bounds__(kThreads)
    SampleKernel(const float* logits, const SamplingParams* params, int32_t* tokens, int vocab) {
  __shared__ float scratch[33];
  __shared__ float sums[kThreads];
  __shared__ int chosen, last_kept;
  const int row = blockIdx.x;
  const float* lg = logits + static_cast<size_t>(row) * vocab;
  const SamplingParams sp = params[row];
  if (!(sp.temperature > 0.0f)) {
    const int t = BlockArgmax(lg, vocab);
    if (threadIdx.x == 0) tokens[row] = t;
    return;
  }
  RowView v{lg, vocab, sp.temperature, 0.0f, 0u, 0u, sp.min_p > 0 ? sp.min_p : 0.0f};
  float mx = -FLT_MAX;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) mx = fmaxf(mx, v.Scaled(i));
  v.m = internal::BlockMax(mx, scratch);
  if (sp.top_k > 0 && sp.top_k < vocab) {
    v.k_key = Bisect(
        [&](uint32_t t) {
          float c = 0.0f;
          for (int i = threadIdx.x; i < vocab; i += blockDim.x) c += OrderedKey(v.Scaled(i)) >= t;
          return internal::BlockSum(c, scratch);
        },
        static_cast<float>(sp.top_k));
  }
  if (sp.top_p <= 0.0f) {
    v.p_key = OrderedKey(v.m);  // nothing asked for: keep only the top token(s)
  } else if (sp.top_p < 1.0f) {
    float z = 0.0f, p;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) z += v.KeepKMin(i, p) ? p : 0.0f;
    z = internal::BlockSum(z, scratch);
    v.p_key = Bisect(
        [&](uint32_t t) {
          float mass = 0.0f, p;
          for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
            if (v.KeepKMin(i, p) && OrderedKey(v.Scaled(i)) >= t) mass += p;
          }
          return internal::BlockSum(mass, scratch);
        },
        sp.top_p * z);
  }
  const float u01 =
      sp.uniform >= 0.0 ? static_cast<float>(sp.uniform) : SampleUniform(sp.seed, sp.step);
  auto kept = [&](int i, float& p) {
    return v.KeepKMin(i, p) && OrderedKey(v.Scaled(i)) >= v.p_key;
  };
  if (sp.descending) {
    // Kept tokens by raw logit, highest first: the token drawn carries the
    // largest key t whose kept mass at or above t exceeds u (bisection).
    auto mass_from = [&](uint32_t t) {
      float mass = 0.0f, p;
      for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
        if (kept(i, p) && OrderedKey(lg[i]) >= t) mass += p;
      }
      return internal::BlockSum(mass, scratch);
    };
    if (threadIdx.x == 0) chosen = vocab;
    const float total = mass_from(0u);  // > 0: the top token (p = 1) is always kept
    // Strictly below the total, so some kept key carries the draw: the
    // largest t with mass_from(t) > u has mass_from(t) > mass_from(t + 1).
    const float u = fminf(u01 * total, nextafterf(total, 0.0f));
    const uint32_t t = Bisect(mass_from, nextafterf(u, INFINITY));
    float ties = 0.0f;
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
      float p;
      if (kept(i, p) && OrderedKey(lg[i]) == t) {
        ties += 1.0f;
        atomicMin(&chosen, i);
      }
    }
    ties = internal::BlockSum(ties, scratch);  // its barriers also publish `chosen`
    if (ties > 1.0f) {
      // Equal logits: the host walks them by id after the mass above them
      // (rare, so one thread does it).
      const float above = t == 0xFFFFFFFFu ? 0.0f : mass_from(t + 1);
      if (threadIdx.x == 0) {
        float run = above;
        for (int i = 0; i < vocab; ++i) {
          float p;
          if (kept(i, p) && OrderedKey(lg[i]) == t) {
            chosen = i;
            run += p;
            if (run > u) break;
          }
        }
      }
    }
    if (threadIdx.x == 0) tokens[row] = chosen < vocab ? chosen : 0;
    return;
  }
  // Inverse-CDF draw in vocabulary order over contiguous per-thread ranges.
  const int per = (vocab + kThreads - 1) / kThreads;
  const int begin = min(vocab, static_cast<int>(threadIdx.x) * per), end = min(vocab, begin + per);
  float local = 0.0f, p;
  int my_last = -1;
  for (int i = begin; i < end; ++i) {
    if (kept(i, p)) {
      local += p;
      my_last = i;
    }
  }
  sums[threadIdx.x] = local;
  if (threadIdx.x == 0) {
    chosen = vocab;
    last_kept = 0;
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // exclusive prefix; 1024 adds are cheap next to the bisections
    float run = 0.0f;
    for (int t = 0; t < kThreads; ++t) {
      const float s = sums[t];
      sums[t] = run;
      run += s;
    }
    scratch[32] = run;
  }
  __syncthreads();
  const float u = u01 * scratch[32];
  float run = sums[threadIdx.x];
  if (my_last >= 0) atomicMax(&last_kept, my_last);
  // Every thread with kept mass walks (not just the one whose range holds u),
  // so a rounding difference between `local` and the walk cannot lose the draw.
  if (local > 0.0f) {
    for (int i = begin; i < end; ++i) {
      if (kept(i, p)) {
        run += p;
        if (run > u) {
          atomicMin(&chosen, i);
          break;
        }
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) tokens[row] = chosen < vocab ? chosen : last_kept;
}

// log(sum exp(lg)) over the row (the log-softmax denominator); every thread
// gets it.
__device__ float BlockLogSumExp(const float* lg, int vocab, float* scratch) {
  float mx = -FLT_MAX;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) mx = fmaxf(mx, lg[i]);
  mx = internal::BlockMax(mx, scratch);
  float s = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) s += __expf(lg[i] - mx);
  return mx + logf(internal::BlockSum(s, scratch));
}

__global__ void __launch_bounds__(kThreads)
    LogprobsKernel(const float* logits, const int32_t* tokens, float* out, int vocab) {
  __shared__ float scratch[33];
  const int row = blockIdx.x;
  const float* lg = logits + static_cast<size_t>(row) * vocab;
  const float log_z = BlockLogSumExp(lg, vocab, scratch);
  if (threadIdx.x == 0) {
    const int t = tokens[row];
    out[row] = (t >= 0 && t < vocab) ? lg[t] - log_z : -INFINITY;
  }
}

__global__ void ApplyLogitEditsKernel(float* logits, const LogitEdit* edits,
                                      const int32_t* offsets, int vocab) {
  const int row = blockIdx.x;
  float* lg = logits + static_cast<size_t>(row) * vocab;
  for (int e = offsets[row] + threadIdx.x; e < offsets[row + 1]; e += blockDim.x) {
    const LogitEdit ed = edits[e];
    if (ed.token < 0 || ed.token >= vocab) continue;
    lg[ed.token] = EditedLogit(lg[ed.token], ed.repetition, ed.subtract, ed.add, ed.mask != 0);
  }
}

__device__ __forceinline__ uint32_t RankKey(float l) {
  return OrderedKey(isnan(l) ? -INFINITY : l);
}

__global__ void __launch_bounds__(kThreads)
    TopLogprobsKernel(const float* logits, const int32_t* ks, int32_t* ids, float* out, int vocab,
                      int max_k) {
  __shared__ float scratch[33];
  __shared__ int count, next_tie;
  __shared__ int sel[kMaxTopLogprobs];
  const int row = blockIdx.x;
  const int k = min(min(ks[row], max_k), vocab);
  if (k <= 0) return;  // the whole block
  const float* lg = logits + static_cast<size_t>(row) * vocab;
  const float log_z = BlockLogSumExp(lg, vocab, scratch);
  // t: the k-th largest key; fewer than k keys lie above it.
  const uint32_t t = Bisect(
      [&](uint32_t key) {
        float c = 0.0f;
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) c += RankKey(lg[i]) >= key;
        return internal::BlockSum(c, scratch);
      },
      static_cast<float>(k));
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (RankKey(lg[i]) > t) sel[atomicAdd(&count, 1)] = i;
  }
  __syncthreads();
  // The rest from the ties at t, lowest ids first (one pass each, <= k).
  int last = -1;
  while (count < k) {
    if (threadIdx.x == 0) next_tie = vocab;
    __syncthreads();
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
      if (i > last && RankKey(lg[i]) == t) atomicMin(&next_tie, i);
    }
    __syncthreads();
    last = next_tie;
    __syncthreads();
    if (threadIdx.x == 0) sel[count++] = last < vocab ? last : 0;
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    for (int a = 1; a < k; ++a) {  // insertion sort of <= 32 by (key desc, id asc)
      const int x = sel[a];
      int b = a - 1;
      while (b >= 0 && (RankKey(lg[sel[b]]) < RankKey(lg[x]) ||
                        (RankKey(lg[sel[b]]) == RankKey(lg[x]) && sel[b] > x))) {
        sel[b + 1] = sel[b];
        --b;
      }
      sel[b + 1] = x;
    }
    for (int j = 0; j < k; ++j) {
      ids[static_cast<size_t>(row) * max_k + j] = sel[j];
      out[static_cast<size_t>(row) * max_k + j] = lg[sel[j]] - log_z;
    }
  }
}

}  // namespace

int TopLogprobs(const float* logits, const int32_t* k, int32_t* ids, float* logprobs, int rows,
                int vocab, int max_k, Stream stream) {
  if (rows < 0 || vocab <= 0 || max_k < 1 || max_k > kMaxTopLogprobs) return internal::kInvalid;
  if (rows == 0) return 0;
  TopLogprobsKernel<<<rows, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(logits, k, ids,
                                                                              logprobs, vocab, max_k);
  return internal::LaunchStatus();
}

int ApplyLogitEdits(float* logits, const LogitEdit* edits, const int32_t* offsets, int rows,
                    int vocab, Stream stream) {
  if (rows < 0 || vocab <= 0) return internal::kInvalid;
  if (rows == 0) return 0;
  ApplyLogitEditsKernel<<<rows, 128, 0, static_cast<cudaStream_t>(stream)>>>(logits, edits,
                                                                            offsets, vocab);
  return internal::LaunchStatus();
}

int Sample(const float* logits, const SamplingParams* params, int32_t* tokens, int rows, int vocab,
           Stream stream) {
  if (rows < 0 || vocab <= 0) return internal::kInvalid;
  if (rows == 0) return 0;
  SampleKernel<<<rows, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(logits, params, tokens,
                                                                         vocab);
  return internal::LaunchStatus();
}

int Logprobs(const float* logits, const int32_t* tokens, float* logprobs, int rows, int vocab,
             Stream stream) {
  if (rows < 0 || vocab <= 0) return internal::kInvalid;
  if (rows == 0) return 0;
  LogprobsKernel<<<rows, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(logits, tokens, logprobs,
                                                                           vocab);
  return internal::LaunchStatus();
}

}  // namespace rill::kernels::cuda
