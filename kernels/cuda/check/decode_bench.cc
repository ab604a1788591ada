#include "kernels/cuda/check/decode_bench.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <string>

#include "kernels/cuda/cuda_kernels.h"

namespace rill::kernels::cuda::check {
namespace {

using ref::Bf16;
using Buf = std::unique_ptr<DevBuf<Bf16>>;

struct Layer {
  Buf norm1, norm2, wq, wk, wv, wo, wgu, wd, k_cache, v_cache;
};

// Weights, caches and activations for batches up to max_batch.
struct Model {
  BenchConfig c;
  int max_batch = 0, blocks_per_seq = 0;
  std::vector<Layer> layers;
  Buf embed, final_norm, h, normed, q, k, v, attn, o, gu, act, mlp;
  std::unique_ptr<DevBuf<float>> logits, inv_freq, workspace;
  std::unique_ptr<DevBuf<int32_t>> tokens, positions, slots, tables, ctx_lens;
  std::unique_ptr<DevBuf<SamplingParams>> params;
  GemmContext* gemm = nullptr;
  int64_t weight_bytes = 0;
  int err = 0;
};

Buf Weights(Model& m, std::mt19937& rng, size_t n, float scale) {
  auto b = std::make_unique<DevBuf<Bf16>>(RandomBf16(rng, n, -scale, scale));
  m.weight_bytes += b->Bytes();
  if (b->error() && !m.err) m.err = b->error();
  return b;
}

Buf Act(Model& m, size_t n) {
  auto b = std::make_unique<DevBuf<Bf16>>(n);
  if (b->error() && !m.err) m.err = b->error();
  return b;
}

void Build(Model& m, std::mt19937& rng) {
  const BenchConfig& c = m.c;
  const int qd = c.q_heads * c.head_dim, kvd = c.kv_heads * c.head_dim, B = m.max_batch;
  m.blocks_per_seq = (c.context + 1 + 15) / 16;
  const size_t cache = size_t(B) * m.blocks_per_seq * 16 * kvd;
  for (int l = 0; l < c.layers && !m.err; ++l) {
    Layer L;
    L.norm1 = Weights(m, rng, c.hidden, 1.0f);
    L.norm2 = Weights(m, rng, c.hidden, 1.0f);
    L.wq = Weights(m, rng, size_t(qd) * c.hidden, 0.05f);
    L.wk = Weights(m, rng, size_t(kvd) * c.hidden, 0.05f);
    L.wv = Weights(m, rng, size_t(kvd) * c.hidden, 0.05f);
    L.wo = Weights(m, rng, size_t(c.hidden) * qd, 0.05f);
    L.wgu = Weights(m, rng, size_t(2) * c.ffn * c.hidden, 0.05f);
    L.wd = Weights(m, rng, size_t(c.hidden) * c.ffn, 0.05f);
    L.k_cache = Act(m, cache);
    L.v_cache = Act(m, cache);
    if (!m.err) m.err = Memset(L.k_cache->get(), 0x3c, L.k_cache->Bytes(), nullptr);
    if (!m.err) m.err = Memset(L.v_cache->get(), 0x3c, L.v_cache->Bytes(), nullptr);
    m.layers.push_back(std::move(L));
  }
  m.embed = Weights(m, rng, size_t(c.vocab) * c.hidden, 0.05f);  // tied with the LM head
  m.final_norm = Weights(m, rng, c.hidden, 1.0f);
  m.h = Act(m, size_t(B) * c.hidden);
  m.normed = Act(m, size_t(B) * c.hidden);
  m.q = Act(m, size_t(B) * qd);
  m.k = Act(m, size_t(B) * kvd);
  m.v = Act(m, size_t(B) * kvd);
  m.attn = Act(m, size_t(B) * qd);
  m.o = Act(m, size_t(B) * c.hidden);
  m.gu = Act(m, size_t(B) * 2 * c.ffn);
  m.act = Act(m, size_t(B) * c.ffn);
  m.mlp = Act(m, size_t(B) * c.hidden);
  m.logits = std::make_unique<DevBuf<float>>(size_t(B) * c.vocab);
  std::vector<float> inv(c.head_dim / 2);
  for (int i = 0; i < c.head_dim / 2; ++i) inv[i] = std::pow(100000.0f, -2.0f * i / c.head_dim);
  m.inv_freq = std::make_unique<DevBuf<float>>(inv);
  PagedAttentionShape s{c.q_heads, c.kv_heads, c.head_dim, 16, m.blocks_per_seq, 0.0f};
  m.workspace = std::make_unique<DevBuf<float>>(DecodeWorkspaceFloats(B, s, c.context + 1, 512));
  std::vector<int32_t> tok(B), pos(B, c.context), slot(B), table(size_t(B) * m.blocks_per_seq),
      lens(B, c.context + 1);
  for (int b = 0; b < B; ++b) {
    tok[b] = rng() % c.vocab;
    for (int j = 0; j < m.blocks_per_seq; ++j)
      table[size_t(b) * m.blocks_per_seq + j] = b * m.blocks_per_seq + j;
    slot[b] = (b * m.blocks_per_seq + c.context / 16) * 16 + c.context % 16;
  }
  m.tokens = std::make_unique<DevBuf<int32_t>>(tok);
  m.positions = std::make_unique<DevBuf<int32_t>>(pos);
  m.slots = std::make_unique<DevBuf<int32_t>>(slot);
  m.tables = std::make_unique<DevBuf<int32_t>>(table);
  m.ctx_lens = std::make_unique<DevBuf<int32_t>>(lens);
  std::vector<SamplingParams> params(B);
  for (int b = 0; b < B; ++b) {
    // Plain temperature sampling: top-k/top-p add ~64 block reductions per
    // row, which the checker covers; here the step's fixed costs are measured.
    params[b].temperature = 0.8f;
    params[b].seed = b;
  }
  m.params = std::make_unique<DevBuf<SamplingParams>>(params);
  for (int e : {m.logits->error(), m.inv_freq->error(), m.workspace->error(), m.tokens->error(),
                m.tables->error(), m.params->error()}) {
    if (e && !m.err) m.err = e;
  }
}

// Queues one decode step for `batch` sequences on `stream`; first error wins.
int Step(Model& m, int batch, Stream st) {
  const BenchConfig& c = m.c;
  const int qd = c.q_heads * c.head_dim, kvd = c.kv_heads * c.head_dim;
  PagedAttentionShape s{c.q_heads, c.kv_heads, c.head_dim, 16, m.blocks_per_seq, 0.0f};
  int e =
      EmbeddingLookup(m.tokens->get(), m.embed->get(), m.h->get(), batch, c.hidden, c.vocab, st);
  for (int l = 0; l < c.layers && !e; ++l) {
    Layer& L = m.layers[l];
    e = RmsNormResidual(l ? m.mlp->get() : nullptr, m.h->get(), L.norm1->get(), m.normed->get(),
                        batch, c.hidden, 1e-5f, st);
    if (!e) e = Gemm(m.gemm, m.normed->get(), L.wq->get(), m.q->get(), batch, qd, c.hidden, false);
    if (!e) e = Gemm(m.gemm, m.normed->get(), L.wk->get(), m.k->get(), batch, kvd, c.hidden, false);
    if (!e) e = Gemm(m.gemm, m.normed->get(), L.wv->get(), m.v->get(), batch, kvd, c.hidden, false);
    if (!e)
      e = Rope(m.q->get(), m.k->get(), m.positions->get(), m.inv_freq->get(), batch, c.q_heads,
               c.kv_heads, c.head_dim, c.head_dim, true, st);
    if (!e)
      e = KvCacheWrite(m.k->get(), m.v->get(), L.k_cache->get(), L.v_cache->get(), m.slots->get(),
                       batch, c.kv_heads, c.head_dim, st);
    if (!e)
      e = PagedAttentionDecode(m.q->get(), L.k_cache->get(), L.v_cache->get(), m.tables->get(),
                               m.ctx_lens->get(), m.attn->get(), m.workspace->get(), batch,
                               c.context + 1, 512, s, st);
    if (!e) e = Gemm(m.gemm, m.attn->get(), L.wo->get(), m.o->get(), batch, c.hidden, qd, false);
    if (!e)
      e = RmsNormResidual(m.o->get(), m.h->get(), L.norm2->get(), m.normed->get(), batch, c.hidden,
                          1e-5f, st);
    if (!e)
      e = Gemm(m.gemm, m.normed->get(), L.wgu->get(), m.gu->get(), batch, 2 * c.ffn, c.hidden,
               false);
    if (!e) e = SwiGlu(m.gu->get(), m.act->get(), batch, c.ffn, st);
    if (!e)
      e = Gemm(m.gemm, m.act->get(), L.wd->get(), m.mlp->get(), batch, c.hidden, c.ffn, false);
  }
  if (!e)
    e = RmsNormResidual(m.mlp->get(), m.h->get(), m.final_norm->get(), m.normed->get(), batch,
                        c.hidden, 1e-5f, st);
  if (!e)
    e = Gemm(m.gemm, m.normed->get(), m.embed->get(), m.logits->get(), batch, c.vocab, c.hidden,
             true);
  if (!e) e = Sample(m.logits->get(), m.params->get(), m.tokens->get(), batch, c.vocab, st);
  return e;
}

Row BenchBatch(Model& m, int batch, Stream st) {
  const std::string name = "decode step batch " + std::to_string(batch);
  int e = Step(m, batch, st);  // eager once: cuBLAS picks kernels outside capture
  if (!e) e = StreamSync(st);
  GraphExec graph = nullptr;
  if (!e) e = GraphCaptureBegin(st);
  if (!e) {
    e = Step(m, batch, st);
    const int end = GraphCaptureEnd(st, &graph);
    if (!e) e = end;
  }
  for (int i = 0; i < 3 && !e; ++i) e = GraphLaunch(graph, st);
  if (!e) e = StreamSync(st);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < m.c.iterations && !e; ++i) e = GraphLaunch(graph, st);
  if (!e) e = StreamSync(st);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / m.c.iterations;
  if (graph) GraphDestroy(graph);
  if (e) return Failed(name, ErrorString(e));
  char note[160];
  const double floor = m.weight_bytes / m.c.hbm_bytes_per_s;
  if (batch == 1) {
    snprintf(note, sizeof(note),
             "%.3f ms/step, %.0f tok/s, %.0f%% of HBM floor (%.1f us for %.0f MB)", secs * 1e3,
             batch / secs, 100.0 * floor / secs, floor * 1e6, m.weight_bytes / 1e6);
  } else {
    snprintf(note, sizeof(note), "%.3f ms/step, %.0f tok/s", secs * 1e3, batch / secs);
  }
  return {name, true, batch / secs, "tokens/s", note};
}

}  // namespace

std::vector<Row> RunDecodeBench(const BenchConfig& config) {
  Model m;
  m.c = config;
  for (int b : config.batches) m.max_batch = std::max(m.max_batch, b);
  std::mt19937 rng(1234);
  Build(m, rng);
  if (!m.err) m.err = StreamSync(nullptr);  // the cache memsets ran on the legacy stream
  Stream st = nullptr;
  if (!m.err) m.err = StreamCreate(&st);
  if (!m.err) m.err = GemmCreate(st, &m.gemm);
  std::vector<Row> rows;
  if (m.err) {
    rows.push_back(Failed("decode bench setup", ErrorString(m.err)));
  } else {
    for (int b : config.batches) rows.push_back(BenchBatch(m, b, st));
  }
  GemmDestroy(m.gemm);
  if (st) StreamDestroy(st);
  return rows;
}

}  // namespace rill::kernels::cuda::check
