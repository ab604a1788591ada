#include <algorithm>
#include <numeric>
#include <string>

#include "kernels/cuda/check/kernel_checks.h"
#include "kernels/cuda/cuda_kernels.h"

namespace rill::kernels::cuda::check {
namespace {

using ref::Bf16;

// A random paged cache: every sequence gets distinct, shuffled blocks.
struct Cache {
  PagedAttentionShape shape;
  int num_blocks = 0;
  std::vector<Bf16> k, v;
  std::vector<int32_t> tables;
};

Cache MakeCache(std::mt19937& rng, const PagedAttentionShape& s, int seqs) {
  Cache c;
  c.shape = s;
  c.num_blocks = seqs * s.max_blocks_per_seq;
  const size_t n = size_t(c.num_blocks) * s.block_size * s.kv_heads * s.head_dim;
  c.k = RandomBf16(rng, n, -2, 2);
  c.v = RandomBf16(rng, n);
  c.tables.resize(c.num_blocks);
  std::iota(c.tables.begin(), c.tables.end(), 0);
  std::shuffle(c.tables.begin(), c.tables.end(), rng);
  return c;
}

std::string ShapeName(const PagedAttentionShape& s) {
  return std::to_string(s.q_heads) + "/" + std::to_string(s.kv_heads) + "h d" +
         std::to_string(s.head_dim);
}

Row CheckDecode(std::mt19937& rng, PagedAttentionShape s, std::vector<int32_t> ctx, int partition) {
  const int seqs = ctx.size();
  const int max_ctx = *std::max_element(ctx.begin(), ctx.end());
  s.max_blocks_per_seq = (max_ctx + s.block_size - 1) / s.block_size;
  const std::string name = "decode attn " + ShapeName(s) + " ctx<=" + std::to_string(max_ctx) +
                           " split " + std::to_string(partition);
  Cache c = MakeCache(rng, s, seqs);
  auto q = RandomBf16(rng, size_t(seqs) * s.q_heads * s.head_dim, -2, 2);
  DevBuf<Bf16> dq(q), dk(c.k), dv(c.v), dout(q.size());
  DevBuf<int32_t> dt(c.tables), dctx(ctx);
  DevBuf<float> ws(DecodeWorkspaceFloats(seqs, s, max_ctx, partition));
  dout.PoisonNow();
  ws.PoisonNow();
  int err = PagedAttentionDecode(dq.get(), dk.get(), dv.get(), dt.get(), dctx.get(), dout.get(),
                                 ws.get(), seqs, max_ctx, partition, s, nullptr);
  if (err) return Failed(name, ErrorString(err));
  std::vector<float> r(q.size());
  ref::PagedAttentionDecode(q.data(), c.k.data(), c.v.data(), c.tables.data(), ctx.data(), r.data(),
                            seqs, s);
  return Compared(name, MaxRelError(ref::ToFloat(dout.Download()), r), kBf16Tol);
}

Row CheckPrefill(std::mt19937& rng, PagedAttentionShape s, std::vector<int32_t> qlen,
                 std::vector<int32_t> ctx) {
  const int seqs = qlen.size();
  std::vector<int32_t> start(seqs + 1, 0);
  for (int i = 0; i < seqs; ++i) start[i + 1] = start[i] + qlen[i];
  const int total = start[seqs];
  const int max_ctx = *std::max_element(ctx.begin(), ctx.end());
  s.max_blocks_per_seq = (max_ctx + s.block_size - 1) / s.block_size;
  const std::string name =
      "prefill attn " + ShapeName(s) + " ragged+chunked " + std::to_string(total) + " tok";
  Cache c = MakeCache(rng, s, seqs);
  auto q = RandomBf16(rng, size_t(total) * s.q_heads * s.head_dim, -2, 2);
  DevBuf<Bf16> dq(q), dk(c.k), dv(c.v), dout(q.size());
  DevBuf<int32_t> dt(c.tables), dstart(start), dctx(ctx);
  dout.PoisonNow();
  int err = PagedAttentionPrefill(dq.get(), dk.get(), dv.get(), dt.get(), dstart.get(), dctx.get(),
                                  dout.get(), seqs, total, s, nullptr);
  if (err) return Failed(name, ErrorString(err));
  std::vector<float> r(q.size());
  ref::PagedAttentionPrefill(q.data(), c.k.data(), c.v.data(), c.tables.data(), start.data(),
                             ctx.data(), r.data(), seqs, s);
  return Compared(name, MaxRelError(ref::ToFloat(dout.Download()), r), kBf16Tol);
}

}  // namespace

std::vector<Row> CheckAttention(std::mt19937& rng) {
  PagedAttentionShape smol;  // SmolLM2-135M: 9 query heads share 3 KV heads
  smol.q_heads = 9;
  smol.kv_heads = 3;
  smol.head_dim = 64;
  smol.block_size = 16;
  PagedAttentionShape llama = smol;  // Llama-3-8B-like heads
  llama.q_heads = 32;
  llama.kv_heads = 8;
  llama.head_dim = 128;
  return {
      CheckDecode(rng, smol, {1, 17, 300, 64}, 512),
      CheckDecode(rng, smol, {2000, 1, 1500, 777, 129}, 256),  // several partitions per seq
      CheckDecode(rng, llama, {4100, 33}, 512),
      CheckPrefill(rng, smol, {5, 1, 40}, {5, 30, 100}),  // seq 2, 3: chunks after a cached prefix
      CheckPrefill(rng, llama, {130, 7}, {130, 300}),
  };
}

}  // namespace rill::kernels::cuda::check
