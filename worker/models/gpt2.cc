#include "worker/models/gpt2.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/ops.h"
#include "worker/models/layers.h"

namespace rill::worker {
namespace {

struct Gpt2Layer {
  std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;
  kernels::cpu::WeightMatrix qkv, proj, fc, fc_proj;
  std::vector<float> qkv_b, proj_b, fc_b, fc_proj_b;
};

class Gpt2 : public CausalLm {
 public:
  Gpt2(std::shared_ptr<const worker::loader::Checkpoint> ckpt, kernels::cpu::ThreadPool* pool,
       const ModelOptions& options)
      : CausalLm(std::move(ckpt), pool, options) {}

  absl::Status Bind() {
    const worker::loader::ModelConfig& c = config();
    const worker::loader::Checkpoint& ck = checkpoint();
    if (options_.comm != nullptr && options_.comm->world_size() > 1) {
      return absl::UnimplementedError(
          "tensor parallelism is implemented for the llama family only; run gpt2 models with "
          "tensor_parallel_size 1");
    }
    if (c.num_heads <= 0 || c.num_kv_heads != c.num_heads || c.head_dim <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(ck.path(), ": bad head configuration for gpt2"));
    }
    const int64_t h = c.hidden_size, f = c.intermediate_size;
    TensorBinder bind(ck, options_.kernel_plan.float_activations());
    bind.Matrix("token_embd", c.vocab_size, h, &embed_);
    bind.Matrix("pos_embd", c.max_position_embeddings, h, &pos_embed_);
    if (ck.Find("output") != nullptr) {
      bind.Matrix("output", c.vocab_size, h, &head_);
    } else {
      head_ = embed_;
    }
    bind.Vector("output_norm", h, &lnf_w_);
    bind.Vector("output_norm.bias", h, &lnf_b_);
    layers_.resize(c.num_layers);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = absl::StrCat("blk.", i, ".");
      Gpt2Layer& L = layers_[i];
      bind.Vector(p + "attn_norm", h, &L.ln1_w);
      bind.Vector(p + "attn_norm.bias", h, &L.ln1_b);
      bind.Vector(p + "ffn_norm", h, &L.ln2_w);
      bind.Vector(p + "ffn_norm.bias", h, &L.ln2_b);
      bind.Matrix(p + "attn_qkv", 3 * h, h, &L.qkv);
      bind.Vector(p + "attn_qkv.bias", 3 * h, &L.qkv_b);
      bind.Matrix(p + "attn_output", h, h, &L.proj);
      bind.Vector(p + "attn_output.bias", h, &L.proj_b);
      bind.Matrix(p + "ffn_up", f, h, &L.fc);
      bind.Vector(p + "ffn_up.bias", f, &L.fc_b);
      bind.Matrix(p + "ffn_down", h, f, &L.fc_proj);
      bind.Vector(p + "ffn_down.bias", h, &L.fc_proj_b);
    }
    if (!bind.status().ok()) return bind.status();
    PackWeights();
    return absl::OkStatus();
  }

  // The same kernels as the Llama family (the plan's packing), the head
  // first: it is the largest, and while a matrix is packed its file pages
  // are resident too.
  void PackWeights() {
    PackForKernelPlan(options_.kernel_plan, checkpoint(), &head_);
    // A tied head: the embedding lookup reads the packed copy too.
    if (head_.data == embed_.data) embed_.packed = head_.packed;
    for (Gpt2Layer& L : layers_) {
      for (kernels::cpu::WeightMatrix* w : {&L.qkv, &L.proj, &L.fc, &L.fc_proj}) {
        PackForKernelPlan(options_.kernel_plan, checkpoint(), w);
      }
    }
  }

 protected:
  absl::Status ForwardValidated(const ForwardBatch& batch, PagedKvCache* cache,
                                ForwardOutput* out) override {
    const worker::loader::ModelConfig& c = config();
    const BatchLayout layout = LayoutBatch(batch);
    const int64_t n = layout.num_tokens, h = c.hidden_size, f = c.intermediate_size;
    const float eps = static_cast<float>(c.layer_norm_eps);
    x_.resize(n * h);
    xn_.resize(n * h);
    qkv_.resize(n * 3 * h);
    q_.resize(n * h);
    k_.resize(n * h);
    v_.resize(n * h);
    attn_.resize(n * h);
    fc_.resize(n * f);
    tmp_.resize(n * h);

    // The int16 kernels' two-pass activations for the first positions.
    const std::vector<uint8_t> precise =
        PrecisePositionMask(options_.kernel_plan, layout.positions);
    const uint8_t* pm = precise.empty() ? nullptr : precise.data();
    EmbedTokens(embed_, layout.tokens, x_.data(), pool_);
    EmbedTokens(pos_embed_, layout.positions, tmp_.data(), pool_);
    kernels::cpu::Add(x_.data(), tmp_.data(), n * h, x_.data());
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const Gpt2Layer& L = layers_[l];
      kernels::cpu::LayerNorm(x_.data(), L.ln1_w.data(), L.ln1_b.data(), n, h, eps, xn_.data());
      kernels::cpu::MatMul(L.qkv, xn_.data(), n, qkv_.data(), pool_, pm);
      AddBiasRows(qkv_.data(), L.qkv_b.data(), n, 3 * h);
      for (int64_t t = 0; t < n; ++t) {  // Split [q | k | v] per token.
        const float* row = qkv_.data() + t * 3 * h;
        std::copy(row, row + h, q_.data() + t * h);
        std::copy(row + h, row + 2 * h, k_.data() + t * h);
        std::copy(row + 2 * h, row + 3 * h, v_.data() + t * h);
      }
      WriteKv(batch, layout, l, k_.data(), v_.data(), cache);
      AttendAll(batch, layout, l, q_.data(), c.num_heads, cache, attn_.data(), pool_);
      kernels::cpu::MatMul(L.proj, attn_.data(), n, tmp_.data(), pool_, pm);
      AddBiasRows(tmp_.data(), L.proj_b.data(), n, h);
      kernels::cpu::Add(x_.data(), tmp_.data(), n * h, x_.data());

      kernels::cpu::LayerNorm(x_.data(), L.ln2_w.data(), L.ln2_b.data(), n, h, eps, xn_.data());
      kernels::cpu::MatMul(L.fc, xn_.data(), n, fc_.data(), pool_, pm);
      AddBiasRows(fc_.data(), L.fc_b.data(), n, f);
      kernels::cpu::Gelu(fc_.data(), n * f, fc_.data());
      kernels::cpu::MatMul(L.fc_proj, fc_.data(), n, tmp_.data(), pool_, pm);
      AddBiasRows(tmp_.data(), L.fc_proj_b.data(), n, h);
      kernels::cpu::Add(x_.data(), tmp_.data(), n * h, x_.data());
    }
    EmitHiddenStates(
        batch, layout, x_.data(), h,
        [&](float* r, int64_t m) {
          kernels::cpu::LayerNorm(r, lnf_w_.data(), lnf_b_.data(), m, h, eps, r);
        },
        out);
    std::vector<float> rows = GatherLogitRows(layout, x_.data(), h);
    const int64_t nr = rows.size() / h;
    kernels::cpu::LayerNorm(rows.data(), lnf_w_.data(), lnf_b_.data(), nr, h, eps, rows.data());
    ProjectLogits(batch, rows, head_, out, pool_);
    return absl::OkStatus();
  }

 private:
  kernels::cpu::WeightMatrix embed_, pos_embed_, head_;
  std::vector<float> lnf_w_, lnf_b_;
  std::vector<Gpt2Layer> layers_;
  std::vector<float> x_, xn_, qkv_, q_, k_, v_, attn_, fc_, tmp_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CausalLm>> CreateGpt2(
    std::shared_ptr<const worker::loader::Checkpoint> checkpoint, kernels::cpu::ThreadPool* pool,
    const ModelOptions& options) {
  auto model = std::make_unique<Gpt2>(std::move(checkpoint), pool, options);
  absl::Status s = model->Bind();
  if (!s.ok()) return s;
  return std::unique_ptr<CausalLm>(std::move(model));
}

}  // namespace rill::worker
