#include "worker/models/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/ops.h"
#include "worker/models/tp_slice.h"

namespace rill::worker {
namespace {

// Rows per expert matmul slice: large enough for the matmul tiles, small
// enough that the gathered rows and the gate/up buffers stay a few MiB.
constexpr int64_t kSliceRows = 256;

// The top-k experts of one token and their weights, from its router logits:
// softmax over all experts (in double), the k largest probabilities (ties to
// the lower index), renormalized to sum 1 when asked. `order` is scratch.
void RouteToken(const float* logits, int64_t experts, int64_t k, bool renormalize,
                std::vector<int32_t>* order, int32_t* chosen, float* weights) {
  double max = logits[0];
  for (int64_t e = 1; e < experts; ++e) max = std::max<double>(max, logits[e]);
  double sum = 0.0;
  for (int64_t e = 0; e < experts; ++e) sum += std::exp(static_cast<double>(logits[e]) - max);
  order->resize(experts);
  std::iota(order->begin(), order->end(), 0);
  std::partial_sort(order->begin(), order->begin() + k, order->end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  double kept = 0.0;
  std::vector<double> p(k);
  for (int64_t j = 0; j < k; ++j) {
    p[j] = std::exp(static_cast<double>(logits[(*order)[j]]) - max) / sum;
    kept += p[j];
  }
  for (int64_t j = 0; j < k; ++j) {
    chosen[j] = (*order)[j];
    weights[j] = static_cast<float>(renormalize ? p[j] / kept : p[j]);
  }
}

}  // namespace

void MoeFeedForward::Bind(TensorBinder* bind, const worker::loader::ModelConfig& c, int64_t layer) {
  const std::string p = absl::StrCat("blk.", layer, ".");
  const int64_t h = c.hidden_size, f = c.expert_intermediate_size;
  hidden_ = h;
  top_k_ = c.expert_used_count;
  renormalize_ = c.expert_weights_norm;
  bind->Matrix(p + "ffn_gate_inp", c.expert_count, h, &router_);
  router_.float_activations = true;
  experts_.resize(c.expert_count);
  for (int64_t e = 0; e < c.expert_count; ++e) {
    bind->Matrix(absl::StrCat(p, "ffn_gate_exps.", e), f, h, &experts_[e].gate);
    bind->Matrix(absl::StrCat(p, "ffn_up_exps.", e), f, h, &experts_[e].up);
    bind->Matrix(absl::StrCat(p, "ffn_down_exps.", e), h, f, &experts_[e].down);
  }
  has_shared_ = c.shared_expert_intermediate_size > 0;
  if (has_shared_) {
    const int64_t fs = c.shared_expert_intermediate_size;
    bind->Vector(p + "ffn_gate_inp_shexp", h, &shared_gate_);
    bind->Matrix(p + "ffn_gate_shexp", fs, h, &shared_.gate);
    bind->Matrix(p + "ffn_up_shexp", fs, h, &shared_.up);
    bind->Matrix(p + "ffn_down_shexp", h, fs, &shared_.down);
  }
}

void MoeFeedForward::TakeShard(const TpPartition& part,
                               std::vector<std::unique_ptr<kernels::cpu::AlignedFloats>>* storage) {
  auto narrow = [storage](Expert* e, int64_t f0, int64_t f1) {
    e->gate = SliceRows(e->gate, f0, f1);
    e->up = SliceRows(e->up, f0, f1);
    e->down = SliceCols(e->down, f0, f1, storage);
  };
  for (Expert& e : experts_) narrow(&e, part.expert_ffn_begin, part.expert_ffn_end);
  if (has_shared_) narrow(&shared_, part.shared_expert_ffn_begin, part.shared_expert_ffn_end);
}

void MoeFeedForward::PackWith(const std::function<void(kernels::cpu::WeightMatrix*)>& pack) {
  for (Expert& e : experts_) {
    for (kernels::cpu::WeightMatrix* w : {&e.gate, &e.up, &e.down}) pack(w);
  }
  if (has_shared_) {
    for (kernels::cpu::WeightMatrix* w : {&shared_.gate, &shared_.up, &shared_.down}) pack(w);
  }
}

void MoeFeedForward::RunExpert(const Expert& e, const float* x, int64_t m, float* y,
                               kernels::cpu::ThreadPool* pool, const uint8_t* precise,
                               MoeScratch* s) const {
  const int64_t f = e.gate.rows, h = hidden_;
  s->gate.resize(std::min(m, kSliceRows) * f);
  s->up.resize(std::min(m, kSliceRows) * f);
  for (int64_t r0 = 0; r0 < m; r0 += kSliceRows) {
    const int64_t rows = std::min(kSliceRows, m - r0);
    const uint8_t* pm = precise ? precise + r0 : nullptr;
    const kernels::cpu::MatMulTarget gate_up[] = {{&e.gate, s->gate.data()}, {&e.up, s->up.data()}};
    kernels::cpu::MatMulShared(gate_up, 2, x + r0 * h, rows, pool, pm);
    // Row by row, so each row's SwiGLU takes the same vector/tail path
    // however many rows the slice has.
    kernels::cpu::ParallelFor(pool, rows, std::max<int64_t>(1, 8192 / f),
                              [&](int64_t b, int64_t end) {
                                for (int64_t r = b; r < end; ++r) {
                                  float* g = s->gate.data() + r * f;
                                  kernels::cpu::SwiGlu(g, s->up.data() + r * f, f, g);
                                }
                              });
    kernels::cpu::MatMul(e.down, s->gate.data(), rows, y + r0 * h, pool, pm);
  }
}

void MoeFeedForward::Forward(const float* x, int64_t n, float* out, kernels::cpu::ThreadPool* pool,
                             const uint8_t* precise, MoeScratch* s) const {
  const int64_t h = hidden_, experts = static_cast<int64_t>(experts_.size()), k = top_k_;
  s->router_logits.resize(n * experts);
  kernels::cpu::MatMul(router_, x, n, s->router_logits.data(), pool);

  // Each expert's tokens, in token order, with their routing weights.
  std::vector<std::vector<int32_t>> tokens(experts);
  std::vector<std::vector<float>> weights(experts);
  std::vector<int32_t> order, chosen(k);
  std::vector<float> w(k);
  for (int64_t t = 0; t < n; ++t) {
    RouteToken(s->router_logits.data() + t * experts, experts, k, renormalize_, &order,
               chosen.data(), w.data());
    for (int64_t j = 0; j < k; ++j) {
      tokens[chosen[j]].push_back(static_cast<int32_t>(t));
      weights[chosen[j]].push_back(w[j]);
    }
  }

  std::memset(out, 0, sizeof(float) * n * h);
  // Experts in ascending order: each token's sum is always added up in the
  // same order (batch invariance).
  for (int64_t e = 0; e < experts; ++e) {
    const std::vector<int32_t>& rows = tokens[e];
    const int64_t m = static_cast<int64_t>(rows.size());
    if (m == 0) continue;
    s->rows.resize(m * h);
    s->down.resize(m * h);
    if (precise) s->precise.resize(m);
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(s->rows.data() + i * h, x + rows[i] * h, sizeof(float) * h);
      if (precise) s->precise[i] = precise[rows[i]];
    }
    RunExpert(experts_[e], s->rows.data(), m, s->down.data(), pool,
              precise ? s->precise.data() : nullptr, s);
    // Rows of one expert are distinct tokens: no two writers share a row.
    kernels::cpu::ParallelFor(pool, m, std::max<int64_t>(1, 8192 / h), [&](int64_t b, int64_t end) {
      for (int64_t i = b; i < end; ++i) {
        float* o = out + rows[i] * h;
        const float* y = s->down.data() + i * h;
        const float wi = weights[e][i];
        for (int64_t c = 0; c < h; ++c) o[c] += wi * y[c];
      }
    });
  }

  if (!has_shared_) return;
  // Qwen2-MoE: + sigmoid(shared_gate . x) * shared_expert(x), every token.
  s->down.resize(n * h);
  RunExpert(shared_, x, n, s->down.data(), pool, precise, s);
  kernels::cpu::ParallelFor(pool, n, std::max<int64_t>(1, 8192 / h), [&](int64_t b, int64_t end) {
    for (int64_t t = b; t < end; ++t) {
      const float* xt = x + t * h;
      double dot = 0.0;
      for (int64_t c = 0; c < h; ++c) dot += static_cast<double>(xt[c]) * shared_gate_[c];
      const float g = static_cast<float>(1.0 / (1.0 + std::exp(-dot)));
      float* o = out + t * h;
      const float* y = s->down.data() + t * h;
      for (int64_t c = 0; c < h; ++c) o[c] += g * y[c];
    }
  });
}

}  // namespace rill::worker
