#include "worker/models/cuda/tp_shard.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_types.h"
#include "kernels/cuda/reference.h"
#include "tests/util/test_seed.h"
#include "worker/loader/gguf_writer.h"
#include "worker/models/cuda/tiny_llama_gguf.h"
#include "worker/models/layers.h"
#include "worker/models/tp_slice.h"

namespace rill::worker {
namespace {

namespace ref = ::rill::kernels::cuda::ref;
using worker::loader::ModelConfig;

ModelConfig Config(int64_t hidden, int64_t heads, int64_t kv_heads, int64_t head_dim,
                   int64_t ffn) {
  ModelConfig c;
  c.architecture = "llama";
  c.hidden_size = hidden;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.intermediate_size = ffn;
  c.num_layers = 1;
  c.vocab_size = 16;
  return c;
}

// SmolLM2-135M's layer: 9 query heads over 3 K/V heads of 64, ffn 1536.
ModelConfig SmolLm2() { return Config(576, 9, 3, 64, 1536); }

// A layer of the config's full shapes, every element drawn from `rng` (bf16
// of a normal, scaled so activations stay of order 1), with a qkv bias.
LayerBf16 RandomLayer(const ModelConfig& c, std::mt19937& rng, bool bias = true) {
  const int64_t h = c.hidden_size, qkv = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim,
                q_dim = c.num_heads * c.head_dim, f = c.intermediate_size;
  std::normal_distribution<float> n(0.0f, 1.0f);
  auto fill = [&](int64_t count, float scale, float offset = 0.0f) {
    std::vector<uint16_t> v(count);
    for (uint16_t& x : v) x = FloatToBf16(offset + scale * n(rng));
    return v;
  };
  LayerBf16 L;
  L.attn_norm = fill(h, 0.1f, 1.0f);
  L.ffn_norm = fill(h, 0.1f, 1.0f);
  L.qkv = fill(qkv * h, 1.0f / std::sqrt(static_cast<float>(h)));
  if (bias) L.qkv_bias = fill(qkv, 0.1f);
  L.o = fill(h * q_dim, 1.0f / std::sqrt(static_cast<float>(q_dim)));
  L.gate_up = fill(2 * f * h, 1.0f / std::sqrt(static_cast<float>(h)));
  L.down = fill(h * f, 1.0f / std::sqrt(static_cast<float>(f)));
  return L;
}

std::vector<TpPartition> Partitions(const ModelConfig& c, int world) {
  std::vector<TpPartition> parts;
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<TpPartition> p = PartitionForRank(c, r, world);
    EXPECT_TRUE(p.ok()) << p.status();
    parts.push_back(*p);
  }
  return parts;
}

// Rows [r0, r1) of a row-major matrix of `cols` columns.
std::vector<uint16_t> Rows(const std::vector<uint16_t>& m, int64_t cols, int64_t r0, int64_t r1) {
  return std::vector<uint16_t>(m.begin() + r0 * cols, m.begin() + r1 * cols);
}

void Append(std::vector<uint16_t>* dst, const std::vector<uint16_t>& src) {
  dst->insert(dst->end(), src.begin(), src.end());
}

// The ranks' pieces put back together: q, k and v row blocks (and gate, up)
// each concatenated over the ranks, O and down columns side by side.
LayerBf16 Reassemble(const std::vector<LayerBf16>& pieces, const ModelConfig& c,
                     const std::vector<TpPartition>& parts) {
  const int64_t h = c.hidden_size, hd = c.head_dim;
  LayerBf16 full;
  std::vector<uint16_t> q, k, v, qb, kb, vb, gate, up;
  for (size_t r = 0; r < pieces.size(); ++r) {
    const int64_t nq = parts[r].num_heads() * hd, nkv = parts[r].num_kv_heads() * hd,
                  f = parts[r].ffn_size();
    Append(&q, Rows(pieces[r].qkv, h, 0, nq));
    Append(&k, Rows(pieces[r].qkv, h, nq, nq + nkv));
    Append(&v, Rows(pieces[r].qkv, h, nq + nkv, nq + 2 * nkv));
    if (!pieces[r].qkv_bias.empty()) {
      Append(&qb, Rows(pieces[r].qkv_bias, 1, 0, nq));
      Append(&kb, Rows(pieces[r].qkv_bias, 1, nq, nq + nkv));
      Append(&vb, Rows(pieces[r].qkv_bias, 1, nq + nkv, nq + 2 * nkv));
    }
    Append(&gate, Rows(pieces[r].gate_up, h, 0, f));
    Append(&up, Rows(pieces[r].gate_up, h, f, 2 * f));
  }
  for (auto* part : {&q, &k, &v}) Append(&full.qkv, *part);
  for (auto* part : {&qb, &kb, &vb}) Append(&full.qkv_bias, *part);
  Append(&full.gate_up, gate);
  Append(&full.gate_up, up);
  for (int64_t row = 0; row < h; ++row) {
    for (size_t r = 0; r < pieces.size(); ++r) {
      const int64_t oc = parts[r].num_heads() * hd, dc = parts[r].ffn_size();
      Append(&full.o, Rows(pieces[r].o, oc, row, row + 1));
      Append(&full.down, Rows(pieces[r].down, dc, row, row + 1));
    }
  }
  full.attn_norm = pieces[0].attn_norm;
  full.ffn_norm = pieces[0].ffn_norm;
  return full;
}

void ExpectSameLayer(const LayerBf16& a, const LayerBf16& b) {
  EXPECT_EQ(a.attn_norm, b.attn_norm);
  EXPECT_EQ(a.ffn_norm, b.ffn_norm);
  EXPECT_EQ(a.qkv, b.qkv);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.gate_up, b.gate_up);
  EXPECT_EQ(a.down, b.down);
}

TEST(ShardLayerBf16, PiecesOfEveryRankConcatenateToTheFullLayer) {
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(0));
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  struct Case {
    ModelConfig c;
    int world;
  };
  const Case cases[] = {{SmolLm2(), 2}, {SmolLm2(), 3}, {Config(16, 8, 4, 4, 40), 4},
                        {Config(16, 8, 4, 4, 37), 3}, {Config(16, 6, 3, 4, 24), 2}};
  for (const Case& k : cases) {
    SCOPED_TRACE(testing::Message() << k.c.num_heads << "/" << k.c.num_kv_heads << " heads, ffn "
                                    << k.c.intermediate_size << ", world " << k.world);
    const LayerBf16 full = RandomLayer(k.c, rng);
    const std::vector<TpPartition> parts = Partitions(k.c, k.world);
    std::vector<LayerBf16> pieces;
    for (const TpPartition& p : parts) {
      pieces.push_back(ShardLayerBf16(full, k.c, p));
      const LayerBf16& s = pieces.back();
      const int64_t rows = (p.num_heads() + 2 * p.num_kv_heads()) * k.c.head_dim;
      EXPECT_EQ(s.qkv.size(), static_cast<size_t>(rows * k.c.hidden_size));
      EXPECT_EQ(s.qkv_bias.size(), static_cast<size_t>(rows));
      EXPECT_EQ(s.o.size(), static_cast<size_t>(k.c.hidden_size * p.num_heads() * k.c.head_dim));
      EXPECT_EQ(s.gate_up.size(), static_cast<size_t>(2 * p.ffn_size() * k.c.hidden_size));
      EXPECT_EQ(s.down.size(), static_cast<size_t>(k.c.hidden_size * p.ffn_size()));
    }
    ExpectSameLayer(Reassemble(pieces, k.c, parts), full);
  }
}

TEST(ShardLayerBf16, WorldOfOneIsTheWholeLayer) {
  std::mt19937 rng(7);
  const ModelConfig c = Config(16, 6, 3, 4, 24);
  const LayerBf16 full = RandomLayer(c, rng);
  ExpectSameLayer(ShardLayerBf16(full, c, Partitions(c, 1)[0]), full);
  const LayerBf16 no_bias = RandomLayer(c, rng, /*bias=*/false);
  EXPECT_TRUE(ShardLayerBf16(no_bias, c, Partitions(c, 1)[0]).qkv_bias.empty());
}

TEST(ShardLayerBf16, SmolLm2SplitsUnevenlyOverTwoRanks) {
  const ModelConfig c = SmolLm2();
  const std::vector<TpPartition> parts = Partitions(c, 2);
  const int64_t q_dim = 9 * 64, kv_dim = 3 * 64;
  // Rank 0: K/V heads 0-1 and their 6 query heads; rank 1: K/V head 2, 3 query heads.
  auto rows0 = QkvRowsOfRank(c, parts[0]);
  auto rows1 = QkvRowsOfRank(c, parts[1]);
  ASSERT_EQ(rows0.size(), 3u);
  EXPECT_EQ(rows0[0].begin, 0);
  EXPECT_EQ(rows0[0].end, 6 * 64);
  EXPECT_EQ(rows0[1].begin, q_dim);
  EXPECT_EQ(rows0[1].end, q_dim + 2 * 64);
  EXPECT_EQ(rows0[2].begin, q_dim + kv_dim);
  EXPECT_EQ(rows0[2].end, q_dim + kv_dim + 2 * 64);
  EXPECT_EQ(rows1[0].begin, 6 * 64);
  EXPECT_EQ(rows1[0].end, q_dim);
  EXPECT_EQ(rows1[1].begin, q_dim + 2 * 64);
  EXPECT_EQ(rows1[1].end, q_dim + kv_dim);
  EXPECT_EQ(rows1[2].begin, q_dim + kv_dim + 2 * 64);
  EXPECT_EQ(rows1[2].end, q_dim + 2 * kv_dim);
  EXPECT_EQ(OColsOfRank(c, parts[0]).size(), 6 * 64);
  EXPECT_EQ(OColsOfRank(c, parts[1]).begin, 6 * 64);
  // ffn 1536 = 6 super-blocks of 256: 3 each.
  EXPECT_EQ(GateUpRowsOfRank(c, parts[1])[0].begin, 768);
  EXPECT_EQ(GateUpRowsOfRank(c, parts[1])[1].begin, 1536 + 768);
  EXPECT_EQ(DownColsOfRank(parts[1]).end, 1536);
}

// Each row of the fused qkv tagged with its head: q head j -> j, k head j ->
// 0x100 + j, v head j -> 0x200 + j (raw codes, one per row).
TEST(ShardLayerBf16, QueryHeadsStayWithTheirKvHead) {
  for (auto [c, world] : {std::pair{SmolLm2(), 2}, std::pair{SmolLm2(), 3},
                          std::pair{Config(16, 12, 4, 4, 32), 3}}) {
    const int64_t hd = c.head_dim, h = c.hidden_size, group = c.num_heads / c.num_kv_heads;
    std::mt19937 rng(1);
    LayerBf16 full = RandomLayer(c, rng);
    const int64_t rows = (c.num_heads + 2 * c.num_kv_heads) * hd;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t head = r / hd;
      const uint16_t tag = head < c.num_heads ? head
                           : head < c.num_heads + c.num_kv_heads
                               ? 0x100 + (head - c.num_heads)
                               : 0x200 + (head - c.num_heads - c.num_kv_heads);
      std::fill(full.qkv.begin() + r * h, full.qkv.begin() + (r + 1) * h, tag);
    }
    for (const TpPartition& p : Partitions(c, world)) {
      const LayerBf16 s = ShardLayerBf16(full, c, p);
      const int nq = p.num_heads(), nkv = p.num_kv_heads();
      ASSERT_EQ(nq, nkv * group);
      // The kernels pair local query head i with local K/V head i / group.
      for (int i = 0; i < nq; ++i) {
        const int q_head = s.qkv[(i * hd) * h];
        const int k_tag = s.qkv[((nq + i / group) * hd) * h];
        const int v_tag = s.qkv[((nq + nkv + i / group) * hd) * h];
        EXPECT_LT(q_head, 0x100);
        EXPECT_EQ(k_tag, 0x100 + q_head / group) << "rank " << p.rank << " local q head " << i;
        EXPECT_EQ(v_tag, 0x200 + q_head / group) << "rank " << p.rank << " local q head " << i;
      }
    }
  }
}

// One decoder layer's math with the CUDA kernels' float references (the
// GPU's layouts and rounding points), over a single `tokens`-token prompt.
class LayerMath {
 public:
  LayerMath(const ModelConfig& c, int tokens) : c_(c), T_(tokens) {
    for (int i = 0; i < c.head_dim / 2; ++i) {
      inv_freq_.push_back(std::pow(10000.0f, -2.0f * i / c.head_dim));
    }
    for (int t = 0; t < T_; ++t) positions_.push_back(t);
  }

  // The residual stream after the layer, the partial O and down outputs of
  // the ranks (one LayerBf16 and its head/feature counts each) summed in
  // float; with round_partials each is first rounded to bf16, as a rank's
  // GEMM writes it before the all-reduce.
  std::vector<uint16_t> Run(const std::vector<uint16_t>& h_in, const std::vector<LayerBf16>& ranks,
                            const std::vector<TpPartition>& parts,
                            bool round_partials = true) const {
    const int H = static_cast<int>(c_.hidden_size);
    std::vector<uint16_t> h = h_in, normed(h.size());
    ref::RmsNormResidual(nullptr, h.data(), ranks[0].attn_norm.data(), normed.data(), T_, H,
                         1e-5f);
    std::vector<float> sum(h.size(), 0.0f);
    for (size_t r = 0; r < ranks.size(); ++r) Accumulate(Attention(normed, ranks[r], parts[r]), round_partials, &sum);
    const std::vector<uint16_t> o = ref::ToBf16(sum);
    ref::RmsNormResidual(o.data(), h.data(), ranks[0].ffn_norm.data(), normed.data(), T_, H, 1e-5f);
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (size_t r = 0; r < ranks.size(); ++r) Accumulate(Mlp(normed, ranks[r], parts[r]), round_partials, &sum);
    const std::vector<uint16_t> down = ref::ToBf16(sum);
    for (size_t i = 0; i < h.size(); ++i) {
      h[i] = ref::ToBf16(ref::ToFloat(h[i]) + ref::ToFloat(down[i]));
    }
    return h;
  }

 private:
  // Adds `partial`, or its bf16 rounding, to *sum.
  static void Accumulate(const std::vector<float>& partial, bool round, std::vector<float>* sum) {
    for (size_t i = 0; i < partial.size(); ++i) {
      (*sum)[i] += round ? ref::ToFloat(ref::ToBf16(partial[i])) : partial[i];
    }
  }

  std::vector<float> Attention(const std::vector<uint16_t>& normed, const LayerBf16& w,
                               const TpPartition& p) const {
    const int H = static_cast<int>(c_.hidden_size), hd = static_cast<int>(c_.head_dim);
    const int qh = p.num_heads(), kvh = p.num_kv_heads(), q_dim = qh * hd, kv_dim = kvh * hd;
    std::vector<float> qkv_f(static_cast<size_t>(T_) * (q_dim + 2 * kv_dim));
    ref::Gemm(normed.data(), w.qkv.data(), qkv_f.data(), T_, q_dim + 2 * kv_dim, H);
    const std::vector<uint16_t> qkv = ref::ToBf16(qkv_f);
    std::vector<uint16_t> q(T_ * q_dim), k(T_ * kv_dim), v(T_ * kv_dim);
    ref::SplitQkv(qkv.data(), w.qkv_bias.empty() ? nullptr : w.qkv_bias.data(), q.data(),
                  k.data(), v.data(), T_, q_dim, kv_dim);
    ref::Rope(q.data(), k.data(), positions_.data(), inv_freq_.data(), T_, qh, kvh, hd, hd,
              /*neox=*/true);
    kernels::cuda::PagedAttentionShape shape;
    shape.q_heads = qh;
    shape.kv_heads = kvh;
    shape.head_dim = hd;
    shape.block_size = 16;
    shape.max_blocks_per_seq = (T_ + 15) / 16;
    std::vector<int32_t> table(shape.max_blocks_per_seq);
    for (int b = 0; b < shape.max_blocks_per_seq; ++b) table[b] = b;
    std::vector<uint16_t> kc(static_cast<size_t>(shape.max_blocks_per_seq) * 16 * kv_dim),
        vc(kc.size());
    ref::KvCacheWrite(k.data(), v.data(), kc.data(), vc.data(), positions_.data(), T_, kvh, hd);
    const std::vector<int32_t> query_start = {0, T_}, context_lens = {T_};
    std::vector<float> attn_f(static_cast<size_t>(T_) * q_dim);
    ref::PagedAttentionPrefill(q.data(), kc.data(), vc.data(), table.data(), query_start.data(),
                               context_lens.data(), attn_f.data(), 1, shape);
    const std::vector<uint16_t> attn = ref::ToBf16(attn_f);
    std::vector<float> o(static_cast<size_t>(T_) * H);
    ref::Gemm(attn.data(), w.o.data(), o.data(), T_, H, q_dim);
    return o;
  }

  std::vector<float> Mlp(const std::vector<uint16_t>& normed, const LayerBf16& w,
                         const TpPartition& p) const {
    const int H = static_cast<int>(c_.hidden_size), f = static_cast<int>(p.ffn_size());
    std::vector<float> gu_f(static_cast<size_t>(T_) * 2 * f);
    ref::Gemm(normed.data(), w.gate_up.data(), gu_f.data(), T_, 2 * f, H);
    const std::vector<uint16_t> gu = ref::ToBf16(gu_f);
    std::vector<uint16_t> act(static_cast<size_t>(T_) * f);
    ref::SwiGlu(gu.data(), act.data(), T_, f);
    std::vector<float> down(static_cast<size_t>(T_) * H);
    ref::Gemm(act.data(), w.down.data(), down.data(), T_, H, f);
    return down;
  }

  ModelConfig c_;
  int T_;
  std::vector<float> inv_freq_;
  std::vector<int32_t> positions_;
};

double RelL2(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = ref::ToFloat(a[i]), y = ref::ToFloat(b[i]);
    num += (x - y) * (x - y);
    den += y * y;
  }
  return std::sqrt(num / den);
}

// The change a layer makes to the residual stream, which is what sharding
// can get wrong (the input passes through unchanged).
std::vector<uint16_t> Delta(const std::vector<uint16_t>& out, const std::vector<uint16_t>& in) {
  std::vector<uint16_t> d(out.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = ref::ToBf16(ref::ToFloat(out[i]) - ref::ToFloat(in[i]));
  return d;
}

TEST(ShardLayerBf16, TwoRanksComputeTheOneRankLayer) {
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(1));
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  // 3 K/V heads of 3 query heads over 2 ranks (2 + 1, as SmolLM2), ffn 40
  // (not a multiple of 32: split 20 + 20), and a qkv bias (Qwen2).
  const ModelConfig c = Config(32, 9, 3, 16, 40);
  const int T = 20;
  const LayerBf16 full = RandomLayer(c, rng);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<uint16_t> h(static_cast<size_t>(T) * c.hidden_size);
  for (uint16_t& x : h) x = ref::ToBf16(n(rng));
  const LayerMath math(c, T);
  const std::vector<uint16_t> one = math.Run(h, {full}, Partitions(c, 1));
  const std::vector<uint16_t> one_delta = Delta(one, h);

  const std::vector<TpPartition> parts = Partitions(c, 2);
  ASSERT_EQ(parts[0].num_kv_heads(), 2);
  ASSERT_EQ(parts[1].num_kv_heads(), 1);
  const std::vector<LayerBf16> shards = {ShardLayerBf16(full, c, parts[0]),
                                         ShardLayerBf16(full, c, parts[1])};
  // Summed in float, the ranks' partial outputs are the whole layer's up to
  // the order of the float sums (a bf16 rounding of o or down may then flip
  // by one unit here and there).
  const double exact_err =
      RelL2(Delta(math.Run(h, shards, parts, /*round_partials=*/false), h),
            Delta(math.Run(h, {full}, Partitions(c, 1), /*round_partials=*/false), h));
  EXPECT_LT(exact_err, 2e-3);
  RecordProperty("two_ranks_float_sum_rel_l2", testing::PrintToString(exact_err));
  // As on the GPU, each partial rounded to bf16 before the sum: about 0.5%
  // of the layer's update (seven seeds tried: 0.0051 to 0.0065).
  const std::vector<uint16_t> two = math.Run(h, shards, parts);
  const double err = RelL2(Delta(two, h), one_delta);
  EXPECT_LT(err, 2e-2);
  RecordProperty("two_ranks_rel_l2", testing::PrintToString(err));

  // A wrong cut must fail this comparison: rank 1 with its query heads
  // shifted by one (a GQA group split across ranks), or with K and V swapped.
  std::vector<LayerBf16> shifted = shards;
  TpPartition off = parts[1];
  off.q_head_begin -= 1;
  off.q_head_end -= 1;
  shifted[1] = ShardLayerBf16(full, c, off);
  const double shifted_err = RelL2(Delta(math.Run(h, shifted, parts), h), one_delta);
  EXPECT_GT(shifted_err, 20 * err + 0.05);
  RecordProperty("shifted_heads_rel_l2", testing::PrintToString(shifted_err));
  std::vector<LayerBf16> swapped = shards;
  const int64_t kv_rows = parts[1].num_kv_heads() * c.head_dim * c.hidden_size;
  const int64_t q_rows = parts[1].num_heads() * c.head_dim * c.hidden_size;
  std::swap_ranges(swapped[1].qkv.begin() + q_rows, swapped[1].qkv.begin() + q_rows + kv_rows,
                   swapped[1].qkv.begin() + q_rows + kv_rows);
  const double swapped_err = RelL2(Delta(math.Run(h, swapped, parts), h), one_delta);
  EXPECT_GT(swapped_err, 20 * err + 0.05);
  RecordProperty("swapped_kv_rel_l2", testing::PrintToString(swapped_err));
}

// Q8_0 with scale 1/16 and quants `q` (one 32-block per 32 values).
std::string Q8_0Bytes(const std::vector<int8_t>& q) {
  std::string out;
  for (size_t b = 0; b < q.size() / 32; ++b) {
    const uint16_t d = kernels::cpu::F32ToF16(1.0f / 16);
    out.append(reinterpret_cast<const char*>(&d), 2);
    out.append(reinterpret_cast<const char*>(q.data() + b * 32), 32);
  }
  return out;
}

// A small GQA checkpoint (6 heads over 2 K/V heads of 16, hidden 64, ffn
// 96) with attn_output and ffn_down in Q8_0, as a real model has them
// quantized, and qkv biases. Over 2 ranks O's cut (column 48) falls inside a
// 32-column block, so the CPU path dequantizes that slice; down's (64) is a
// zero-copy view.
worker::loader::GgufWriter SmallGqaGguf(std::mt19937& rng) {
  constexpr int64_t kHidden = 64, kHeads = 6, kKv = 2, kHd = 16, kFfn = 96;
  worker::loader::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("tokenizer.ggml.model", "gpt2");
  std::vector<std::string> tokens;
  for (int i = 0; i < 16; ++i) tokens.push_back("t" + std::to_string(i));
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddUint32("llama.embedding_length", kHidden);
  w.AddUint32("llama.block_count", 1);
  w.AddUint32("llama.attention.head_count", kHeads);
  w.AddUint32("llama.attention.head_count_kv", kKv);
  w.AddUint32("llama.attention.key_length", kHd);  // not hidden / heads
  w.AddUint32("llama.attention.value_length", kHd);
  w.AddUint32("llama.feed_forward_length", kFfn);
  w.AddUint32("llama.context_length", 64);
  w.AddFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  std::uniform_int_distribution<int> qd(-127, 127);
  std::normal_distribution<float> n(0.0f, 1.0f);
  auto f32 = [&](int64_t count) {
    std::vector<float> v(count);
    for (float& x : v) x = n(rng);
    return v;
  };
  auto q8 = [&](int64_t count) {
    std::vector<int8_t> v(count);
    for (int8_t& x : v) x = static_cast<int8_t>(qd(rng));
    return Q8_0Bytes(v);
  };
  w.AddF32Tensor("token_embd.weight", {kHidden, 16}, f32(kHidden * 16));
  w.AddF32Tensor("output_norm.weight", {kHidden}, f32(kHidden));
  const std::string b = "blk.0.";
  w.AddF32Tensor(b + "attn_norm.weight", {kHidden}, f32(kHidden));
  w.AddF32Tensor(b + "ffn_norm.weight", {kHidden}, f32(kHidden));
  w.AddF32Tensor(b + "attn_q.weight", {kHidden, kHeads * kHd}, f32(kHidden * kHeads * kHd));
  w.AddF32Tensor(b + "attn_k.weight", {kHidden, kKv * kHd}, f32(kHidden * kKv * kHd));
  w.AddF32Tensor(b + "attn_v.weight", {kHidden, kKv * kHd}, f32(kHidden * kKv * kHd));
  w.AddF32Tensor(b + "attn_q.bias", {kHeads * kHd}, f32(kHeads * kHd));
  w.AddF32Tensor(b + "attn_k.bias", {kKv * kHd}, f32(kKv * kHd));
  w.AddF32Tensor(b + "attn_v.bias", {kKv * kHd}, f32(kKv * kHd));
  w.AddTensor(b + "attn_output.weight", kernels::cpu::GgmlType::kQ8_0, {kHeads * kHd, kHidden},
              q8(kHidden * kHeads * kHd));
  w.AddF32Tensor(b + "ffn_gate.weight", {kHidden, kFfn}, f32(kHidden * kFfn));
  w.AddF32Tensor(b + "ffn_up.weight", {kHidden, kFfn}, f32(kHidden * kFfn));
  w.AddTensor(b + "ffn_down.weight", kernels::cpu::GgmlType::kQ8_0, {kFfn, kHidden},
              q8(kHidden * kFfn));
  return w;
}

// A CPU tensor-parallel view (tp_slice.h) as bf16, row-major.
std::vector<uint16_t> ViewBf16(const kernels::cpu::WeightMatrix& w) {
  std::vector<float> row(w.cols);
  std::vector<uint16_t> out;
  for (int64_t r = 0; r < w.rows; ++r) {
    kernels::cpu::DequantizeRow(w.type, static_cast<const uint8_t*>(w.data) + r * w.row_stride_bytes,
                                row.data(), w.cols);
    for (float x : row) out.push_back(FloatToBf16(x));
  }
  return out;
}

std::vector<uint16_t> SliceBf16(const std::vector<float>& v, int64_t b, int64_t e) {
  std::vector<uint16_t> out;
  for (int64_t i = b; i < e; ++i) out.push_back(FloatToBf16(v[i]));
  return out;
}

// The CPU Llama's TakeShard (llama.cc) narrows its bound matrices with
// SliceRows/SliceCols over the same partition: the CUDA rank must upload
// exactly those weights (in bf16), fused.
TEST(ShardLayerBf16, MatchesTheCpuTensorParallelSlices) {
  std::mt19937 rng(static_cast<uint32_t>(rill::tests::util::StreamSeed(2)));
  const std::string path = tiny_gguf::TmpPath("tp_shard_gqa.gguf");
  ASSERT_TRUE(SmallGqaGguf(rng).WriteFile(path).ok());
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ck =
      worker::loader::LoadCheckpoint(path);
  ASSERT_TRUE(ck.ok()) << ck.status();
  const ModelConfig& c = (*ck)->config();
  LayerBf16 full;
  ASSERT_TRUE(BuildLayerBf16(**ck, 0, &full).ok());
  const int64_t h = c.hidden_size, hd = c.head_dim, qd = c.num_heads * hd,
                kvd = c.num_kv_heads * hd, f = c.intermediate_size;
  auto bind = [&](const std::string& name, int64_t rows, int64_t cols) {
    absl::StatusOr<kernels::cpu::WeightMatrix> m = BindMatrix(**ck, "blk.0." + name, rows, cols, true);
    EXPECT_TRUE(m.ok()) << m.status();
    return *m;
  };
  const auto q = bind("attn_q", qd, h), k = bind("attn_k", kvd, h), v = bind("attn_v", kvd, h),
             o = bind("attn_output", h, qd), gate = bind("ffn_gate", f, h),
             up = bind("ffn_up", f, h), down = bind("ffn_down", h, f);
  auto bias = [&](const std::string& name, int64_t n) {
    absl::StatusOr<std::vector<float>> b = LoadVector(**ck, "blk.0." + name, n);
    EXPECT_TRUE(b.ok()) << b.status();
    return *b;
  };
  const std::vector<float> qb = bias("attn_q.bias", qd), kb = bias("attn_k.bias", kvd),
                           vb = bias("attn_v.bias", kvd);
  for (const TpPartition& p : Partitions(c, 2)) {
    SCOPED_TRACE(p.rank);
    const int64_t q0 = p.q_head_begin * hd, q1 = p.q_head_end * hd;
    const int64_t kv0 = p.kv_head_begin * hd, kv1 = p.kv_head_end * hd;
    std::vector<std::unique_ptr<kernels::cpu::AlignedFloats>> storage;
    std::vector<uint16_t> qkv, qkv_bias, gate_up;
    Append(&qkv, ViewBf16(SliceRows(q, q0, q1)));
    Append(&qkv, ViewBf16(SliceRows(k, kv0, kv1)));
    Append(&qkv, ViewBf16(SliceRows(v, kv0, kv1)));
    Append(&qkv_bias, SliceBf16(qb, q0, q1));
    Append(&qkv_bias, SliceBf16(kb, kv0, kv1));
    Append(&qkv_bias, SliceBf16(vb, kv0, kv1));
    Append(&gate_up, ViewBf16(SliceRows(gate, p.ffn_begin, p.ffn_end)));
    Append(&gate_up, ViewBf16(SliceRows(up, p.ffn_begin, p.ffn_end)));
    const LayerBf16 s = ShardLayerBf16(full, c, p);
    EXPECT_EQ(s.qkv, qkv);
    EXPECT_EQ(s.qkv_bias, qkv_bias);
    EXPECT_EQ(s.gate_up, gate_up);
    EXPECT_EQ(s.o, ViewBf16(SliceCols(o, q0, q1, &storage)));
    EXPECT_EQ(s.down, ViewBf16(SliceCols(down, p.ffn_begin, p.ffn_end, &storage)));
  }
}

}  // namespace
}  // namespace rill::worker
