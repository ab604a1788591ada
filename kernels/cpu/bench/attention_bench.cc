// Paged attention throughput for the default model's decode shapes
// (SmolLM2-135M: 9 query heads, 3 KV heads, head_dim 64, block size 16):
// B sequences, one query token each, at a given context length.
//
//   bazel run //kernels/cpu/bench:attention_bench -- [--threads=N] [--seqs=32]
//       [--contexts=64,256,1024,2048] [--min_ms=M] [--kv_dtype=f32|f16]
// CPU time per call (all threads), so other load on the machine skews it
// less than wall time.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/thread_pool.h"

namespace rill::kernels::cpu {
namespace {

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int Main(int argc, char** argv) {
  int threads = 2, seqs = 32;
  double min_ms = 300;
  std::vector<int64_t> contexts = {64, 256, 1024, 2048};
  KvDtype dtype = KvDtype::kF32;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--threads=", 0) == 0) threads = std::atoi(a.c_str() + 10);
    if (a.rfind("--seqs=", 0) == 0) seqs = std::atoi(a.c_str() + 7);
    if (a.rfind("--min_ms=", 0) == 0) min_ms = std::atof(a.c_str() + 9);
    if (a == "--kv_dtype=f16") dtype = KvDtype::kF16;
    if (a.rfind("--contexts=", 0) == 0) {
      contexts.clear();
      for (absl::string_view s : absl::StrSplit(a.substr(11), ',')) {
        int64_t v;
        if (absl::SimpleAtoi(s, &v) && v > 0) contexts.push_back(v);
      }
    }
  }
  const int q_heads = 9, kv_heads = 3, hd = 64, bs = 16;
  ThreadPool pool(threads);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  printf("threads=%d seqs=%d kv_dtype=%s (q_heads %d, kv_heads %d, head_dim %d)\n", threads, seqs,
         dtype == KvDtype::kF16 ? "f16" : "f32", q_heads, kv_heads, hd);
  printf("%8s %12s %14s %12s\n", "context", "us/call", "us/seq/layer", "GFLOP/s");
  for (int64_t ctx : contexts) {
    const int64_t blocks_per_seq = (ctx + bs - 1) / bs;
    const int64_t n_blocks = blocks_per_seq * seqs;
    std::vector<float> k(n_blocks * bs * kv_heads * hd), v(k.size());
    for (float& x : k) x = normal(rng);
    for (float& x : v) x = normal(rng);
    std::vector<uint16_t> k16(k.size()), v16(v.size());
    if (dtype == KvDtype::kF16) {
      ConvertToKvF16(k.data(), k16.data(), k.size());
      ConvertToKvF16(v.data(), v16.data(), v.size());
    }
    std::vector<float> q(seqs * q_heads * hd), out(q.size());
    for (float& x : q) x = normal(rng);
    std::vector<std::vector<int32_t>> tables(seqs);
    // Interleaved block ids, as a long-running cache hands them out.
    for (int s = 0; s < seqs; ++s) {
      for (int64_t b = 0; b < blocks_per_seq; ++b) tables[s].push_back(b * seqs + s);
    }
    std::vector<PagedAttentionArgs> args(seqs);
    for (int s = 0; s < seqs; ++s) {
      PagedAttentionArgs& a = args[s];
      a.q = q.data() + s * q_heads * hd;
      a.out = out.data() + s * q_heads * hd;
      a.k_cache = dtype == KvDtype::kF16 ? static_cast<const void*>(k16.data()) : k.data();
      a.v_cache = dtype == KvDtype::kF16 ? static_cast<const void*>(v16.data()) : v.data();
      a.kv_dtype = dtype;
      a.block_table = tables[s].data();
      a.block_table_len = blocks_per_seq;
      a.block_size = bs;
      a.start_pos = ctx - 1;
      a.n_q = 1;
      a.context_len = ctx;
      a.num_heads = q_heads;
      a.num_kv_heads = kv_heads;
      a.head_dim = hd;
    }
    PagedAttentionBatch(args, &pool);  // warm up
    int calls = 0;
    const double t0 = CpuSeconds();
    double t1 = t0;
    while ((t1 - t0) * 1e3 < min_ms * threads) {
      PagedAttentionBatch(args, &pool);
      ++calls;
      t1 = CpuSeconds();
    }
    const double us = (t1 - t0) * 1e6 / calls / threads;  // wall-equivalent per call
    const double flops = 4.0 * seqs * q_heads * ctx * hd;
    printf("%8lld %12.1f %14.2f %12.2f\n", static_cast<long long>(ctx), us, us / seqs,
           flops / (us * 1e3));
  }
  return 0;
}

}  // namespace
}  // namespace rill::kernels::cpu

int main(int argc, char** argv) { return rill::kernels::cpu::Main(argc, argv); }
