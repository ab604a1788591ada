#include "worker/models/bert.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/ops.h"
#include "worker/models/layers.h"

namespace rill::worker {
namespace {

struct BertLayer {
  kernels::cpu::WeightMatrix q, k, v, o, up, down;
  std::vector<float> q_b, k_b, v_b, o_b, up_b, down_b;
  std::vector<float> attn_ln_w, attn_ln_b, out_ln_w, out_ln_b;
};

// BERT's "gelu": the exact erf form (GPT-2's tanh approximation differs by
// up to ~1e-3, enough to move embeddings visibly).
void GeluErf(float* x, int64_t n, kernels::cpu::ThreadPool* pool) {
  pool->ParallelFor(n, 4096, [x](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * static_cast<float>(M_SQRT1_2)));
    }
  });
}

class Bert : public Encoder {
 public:
  Bert(std::shared_ptr<const worker::loader::Checkpoint> ckpt, kernels::cpu::ThreadPool* pool,
       const ModelOptions& options)
      : Encoder(std::move(ckpt), pool, options) {}

  absl::Status Bind() {
    const worker::loader::ModelConfig& c = config();
    const int64_t h = c.hidden_size, f = c.intermediate_size;
    // Embedding tables are read row by row (EmbedTokens); the matrices get
    // f32 activations so the encoder matches the float64 reference closely.
    TensorBinder bind(*checkpoint_, /*float_activations=*/true);
    bind.Matrix("token_embd", c.vocab_size, h, &word_);
    bind.Matrix("pos_embd", c.max_position_embeddings, h, &pos_);
    bind.Matrix("token_types", c.type_vocab_size, h, &types_);
    bind.Vector("token_embd_norm", h, &emb_ln_w_);
    bind.Vector("token_embd_norm.bias", h, &emb_ln_b_);
    layers_.resize(c.num_layers);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = absl::StrCat("blk.", i, ".");
      BertLayer& L = layers_[i];
      bind.Matrix(p + "attn_q", h, h, &L.q);
      bind.Matrix(p + "attn_k", h, h, &L.k);
      bind.Matrix(p + "attn_v", h, h, &L.v);
      bind.Matrix(p + "attn_output", h, h, &L.o);
      bind.Matrix(p + "ffn_up", f, h, &L.up);
      bind.Matrix(p + "ffn_down", h, f, &L.down);
      bind.Vector(p + "attn_q.bias", h, &L.q_b);
      bind.Vector(p + "attn_k.bias", h, &L.k_b);
      bind.Vector(p + "attn_v.bias", h, &L.v_b);
      bind.Vector(p + "attn_output.bias", h, &L.o_b);
      bind.Vector(p + "ffn_up.bias", f, &L.up_b);
      bind.Vector(p + "ffn_down.bias", h, &L.down_b);
      bind.Vector(p + "attn_output_norm", h, &L.attn_ln_w);
      bind.Vector(p + "attn_output_norm.bias", h, &L.attn_ln_b);
      bind.Vector(p + "layer_output_norm", h, &L.out_ln_w);
      bind.Vector(p + "layer_output_norm.bias", h, &L.out_ln_b);
    }
    if (!bind.status().ok()) return bind.status();
    // Always the exact path (above), with the plan's weight layout: the
    // interleaved kernels keep its numerics; int16 and q8 do not, so their
    // plans leave the file's rows.
    if (options_.kernel_plan.matmul == kernels::cpu::MatmulKind::kExact) {
      for (BertLayer& L : layers_) {
        for (kernels::cpu::WeightMatrix* w : {&L.q, &L.k, &L.v, &L.o, &L.up, &L.down}) {
          PackForKernelPlan(options_.kernel_plan, *checkpoint_, w);
        }
      }
    }
    return absl::OkStatus();
  }

 protected:
  absl::Status EncodeValidated(const std::vector<EncoderInput>& batch,
                               std::vector<std::vector<float>>* hidden) override {
    const worker::loader::ModelConfig& c = config();
    const int64_t h = c.hidden_size, f = c.intermediate_size;
    const float eps = static_cast<float>(c.layer_norm_eps);
    std::vector<int32_t> tokens, positions, types;
    std::vector<int64_t> begin{0};
    for (const EncoderInput& in : batch) {
      for (size_t i = 0; i < in.tokens.size(); ++i) {
        tokens.push_back(in.tokens[i]);
        positions.push_back(static_cast<int32_t>(i));
        types.push_back(in.token_types.empty() ? 0 : in.token_types[i]);
      }
      begin.push_back(static_cast<int64_t>(tokens.size()));
    }
    const int64_t n = static_cast<int64_t>(tokens.size());
    x_.resize(n * h);
    tmp_.resize(n * h);
    q_.resize(n * h);
    k_.resize(n * h);
    v_.resize(n * h);
    attn_.resize(n * h);
    ffn_.resize(std::min(n, kFfnTokens) * f);

    EmbedTokens(word_, tokens, x_.data(), pool_);
    EmbedTokens(pos_, positions, tmp_.data(), pool_);
    kernels::cpu::Add(x_.data(), tmp_.data(), n * h, x_.data());
    EmbedTokens(types_, types, tmp_.data(), pool_);
    kernels::cpu::Add(x_.data(), tmp_.data(), n * h, x_.data());
    kernels::cpu::LayerNorm(x_.data(), emb_ln_w_.data(), emb_ln_b_.data(), n, h, eps, x_.data());

    for (const BertLayer& L : layers_) {
      kernels::cpu::MatMul(L.q, x_.data(), n, q_.data(), pool_);
      kernels::cpu::MatMul(L.k, x_.data(), n, k_.data(), pool_);
      kernels::cpu::MatMul(L.v, x_.data(), n, v_.data(), pool_);
      AddBiasRows(q_.data(), L.q_b.data(), n, h);
      AddBiasRows(k_.data(), L.k_b.data(), n, h);
      AddBiasRows(v_.data(), L.v_b.data(), n, h);
      Attend(begin);
      kernels::cpu::MatMul(L.o, attn_.data(), n, tmp_.data(), pool_);
      AddBiasRows(tmp_.data(), L.o_b.data(), n, h);
      kernels::cpu::Add(x_.data(), tmp_.data(), n * h, x_.data());
      kernels::cpu::LayerNorm(x_.data(), L.attn_ln_w.data(), L.attn_ln_b.data(), n, h, eps,
                              x_.data());

      // Per-token MLP in slices of kFfnTokens (same results; bounded scratch).
      for (int64_t t0 = 0; t0 < n; t0 += kFfnTokens) {
        const int64_t m = std::min(kFfnTokens, n - t0);
        kernels::cpu::MatMul(L.up, x_.data() + t0 * h, m, ffn_.data(), pool_);
        AddBiasRows(ffn_.data(), L.up_b.data(), m, f);
        GeluErf(ffn_.data(), m * f, pool_);
        kernels::cpu::MatMul(L.down, ffn_.data(), m, tmp_.data() + t0 * h, pool_);
      }
      AddBiasRows(tmp_.data(), L.down_b.data(), n, h);
      kernels::cpu::Add(x_.data(), tmp_.data(), n * h, x_.data());
      kernels::cpu::LayerNorm(x_.data(), L.out_ln_w.data(), L.out_ln_b.data(), n, h, eps,
                              x_.data());
    }
    hidden->assign(batch.size(), {});
    for (size_t s = 0; s < batch.size(); ++s) {
      (*hidden)[s].assign(x_.data() + begin[s] * h, x_.data() + begin[s + 1] * h);
    }
    return absl::OkStatus();
  }

 private:
  // Bidirectional attention within each sequence: attn_ = softmax(q k^T /
  // sqrt(d)) v per head. Work items are (sequence, head, query) rows, each
  // computed the same way whatever the batch, so results are batch invariant.
  void Attend(const std::vector<int64_t>& begin) {
    const worker::loader::ModelConfig& c = config();
    const int64_t h = c.hidden_size, d = c.head_dim, heads = c.num_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    std::vector<int64_t> row_seq;  // Query token -> its sequence.
    for (size_t s = 0; s + 1 < begin.size(); ++s) {
      for (int64_t t = begin[s]; t < begin[s + 1]; ++t) row_seq.push_back(static_cast<int64_t>(s));
    }
    const int64_t items = static_cast<int64_t>(row_seq.size()) * heads;
    pool_->ParallelFor(items, 8, [&](int64_t i0, int64_t i1) {
      std::vector<float> scores;
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t t = item / heads, hd = item % heads;
        const int64_t b = begin[row_seq[t]], e = begin[row_seq[t] + 1];
        const float* q = q_.data() + t * h + hd * d;
        scores.resize(e - b);
        for (int64_t j = b; j < e; ++j) {
          const float* k = k_.data() + j * h + hd * d;
          float dot = 0.0f;
          for (int64_t x = 0; x < d; ++x) dot += q[x] * k[x];
          scores[j - b] = dot * scale;
        }
        kernels::cpu::Softmax(scores.data(), e - b);
        float* out = attn_.data() + t * h + hd * d;
        std::fill(out, out + d, 0.0f);
        for (int64_t j = b; j < e; ++j) {
          const float* v = v_.data() + j * h + hd * d;
          const float p = scores[j - b];
          for (int64_t x = 0; x < d; ++x) out[x] += p * v[x];
        }
      }
    });
  }

  kernels::cpu::WeightMatrix word_, pos_, types_;
  std::vector<float> emb_ln_w_, emb_ln_b_;
  std::vector<BertLayer> layers_;
  kernels::cpu::AlignedFloats x_, tmp_, q_, k_, v_, attn_, ffn_;
  static constexpr int64_t kFfnTokens = 256;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Encoder>> CreateBert(
    std::shared_ptr<const worker::loader::Checkpoint> checkpoint, kernels::cpu::ThreadPool* pool,
    const ModelOptions& options) {
  auto model = std::make_unique<Bert>(std::move(checkpoint), pool, options);
  absl::Status s = model->Bind();
  if (!s.ok()) return s;
  return std::unique_ptr<Encoder>(std::move(model));
}

}  // namespace rill::worker
