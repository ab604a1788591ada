#include "worker/models/llama.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/ops.h"
#include "worker/lora/lora_apply.h"
#include "worker/models/layers.h"
#include "worker/models/moe.h"
#include "worker/models/tp_plan.h"
#include "worker/models/tp_slice.h"

namespace rill::worker {
namespace {

struct LlamaLayer {
  std::vector<float> attn_norm, ffn_norm;
  kernels::cpu::WeightMatrix q, k, v, o, gate, up, down;
  std::vector<float> q_bias, k_bias, v_bias;  // empty unless attention_bias
  std::vector<float> q_norm, k_norm;          // [head_dim]; empty unless qk_norm (Qwen3)
  std::vector<float> post_attn_norm, post_ffw_norm;  // [hidden]; empty unless post_norms
  std::unique_ptr<MoeFeedForward> moe;  // MoE layers only (gate/up/down stay unbound)
};

class Llama : public CausalLm {
 public:
  Llama(std::shared_ptr<const worker::loader::Checkpoint> ckpt, kernels::cpu::ThreadPool* pool,
        const ModelOptions& options)
      : CausalLm(std::move(ckpt), pool, options) {}

  absl::Status Bind() {
    const worker::loader::ModelConfig& c = config();
    const worker::loader::Checkpoint& ck = checkpoint();
    if (c.num_heads <= 0 || c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 ||
        c.head_dim <= 0 || c.head_dim % 2 != 0 || c.RopeDim() % 2 != 0 ||
        c.RopeDim() > c.head_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          ck.path(), ": bad head configuration (", c.num_heads, " heads, ", c.num_kv_heads,
          " kv heads, head_dim ", c.head_dim, ", rotary dims ", c.RopeDim(), ")"));
    }
    const int64_t h = c.hidden_size, qd = c.num_heads * c.head_dim,
                  kvd = c.num_kv_heads * c.head_dim, f = c.intermediate_size;
    const int world = options_.comm ? options_.comm->world_size() : 1;
    absl::StatusOr<TpPartition> part =
        PartitionForRank(c, options_.comm ? options_.comm->rank() : 0, world);
    if (!part.ok()) return part.status();
    part_ = *part;
    cache_kv_heads_ = part_.num_kv_heads();
    TensorBinder bind(ck, options_.kernel_plan.float_activations());
    bind.Matrix("token_embd", c.vocab_size, h, &embed_);
    if (ck.Find("output") != nullptr) {
      bind.Matrix("output", c.vocab_size, h, &head_);
    } else {
      head_ = embed_;
    }
    bind.Vector("output_norm", h, &output_norm_);
    layers_.resize(c.num_layers);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const std::string p = absl::StrCat("blk.", i, ".");
      LlamaLayer& L = layers_[i];
      bind.Vector(p + "attn_norm", h, &L.attn_norm);
      bind.Vector(p + "ffn_norm", h, &L.ffn_norm);
      bind.Matrix(p + "attn_q", qd, h, &L.q);
      bind.Matrix(p + "attn_k", kvd, h, &L.k);
      bind.Matrix(p + "attn_v", kvd, h, &L.v);
      bind.Matrix(p + "attn_output", h, qd, &L.o);
      if (c.IsMoeLayer(i)) {
        L.moe = std::make_unique<MoeFeedForward>();
        L.moe->Bind(&bind, c, i);
      } else {
        bind.Matrix(p + "ffn_gate", f, h, &L.gate);
        bind.Matrix(p + "ffn_up", f, h, &L.up);
        bind.Matrix(p + "ffn_down", h, f, &L.down);
      }
      if (c.qk_norm) {
        bind.Vector(p + "attn_q_norm", c.head_dim, &L.q_norm);
        bind.Vector(p + "attn_k_norm", c.head_dim, &L.k_norm);
      }
      if (c.post_norms) {
        bind.Vector(p + "post_attention_norm", h, &L.post_attn_norm);
        bind.Vector(p + "post_ffw_norm", h, &L.post_ffw_norm);
      }
      if (ck.Find(p + "attn_q.bias") != nullptr) {
        bind.Vector(p + "attn_q.bias", qd, &L.q_bias);
        bind.Vector(p + "attn_k.bias", kvd, &L.k_bias);
        bind.Vector(p + "attn_v.bias", kvd, &L.v_bias);
      }
    }
    if (!bind.status().ok()) return bind.status();
    if (absl::Status s = bind.CheckEveryLayerTensorBound(); !s.ok()) return s;
    if (c.mlp_activation != "silu" && c.mlp_activation != "gelu_tanh") {
      return absl::InvalidArgumentError(absl::StrCat(ck.path(), ": MLP activation '",
                                                     c.mlp_activation, "' is not supported"));
    }
    gelu_mlp_ = c.mlp_activation == "gelu_tanh";
    if (c.norm_weight_offset != 0.0) {
      // HF Gemma applies its norms as (1 + w): fold the 1 in once.
      const float offset = static_cast<float>(c.norm_weight_offset);
      auto shift = [offset](std::vector<float>* v) {
        for (float& w : *v) w += offset;
      };
      shift(&output_norm_);
      for (LlamaLayer& L : layers_) {
        for (std::vector<float>* v : {&L.attn_norm, &L.ffn_norm, &L.q_norm, &L.k_norm,
                                      &L.post_attn_norm, &L.post_ffw_norm}) {
          shift(v);
        }
      }
    }
    if (world > 1) TakeShard();
    if (options_.kernel_plan.packs_weights()) PackWeights();
    absl::StatusOr<RotaryTable> rope = RotaryTableFor(c, /*local=*/false);
    if (!rope.ok()) return rope.status();
    rope_ = std::move(*rope);
    if (!c.local_rope_layers.empty()) {
      absl::StatusOr<RotaryTable> local = RotaryTableFor(c, /*local=*/true);
      if (!local.ok()) return local.status();
      local_rope_ = std::move(*local);
    }
    if (ck.Find("rope_freqs") != nullptr) {
      // llama.cpp's GGUF form of Llama-3.1 scaling: per-pair divisors of the
      // base frequencies, stored instead of the rope_scaling parameters.
      std::vector<float> divisors;
      bind.Vector("rope_freqs", c.RopeDim() / 2, &divisors);
      if (!bind.status().ok()) return bind.status();
      for (size_t i = 0; i < divisors.size(); ++i) rope_.inv_freq[i] /= divisors[i];
    }
    return absl::OkStatus();
  }

  // Narrows every layer to this rank's heads and MLP (or experts') features.
  void TakeShard() {
    const int64_t hd = config().head_dim;
    const int64_t q0 = part_.q_head_begin * hd, q1 = part_.q_head_end * hd;
    const int64_t kv0 = part_.kv_head_begin * hd, kv1 = part_.kv_head_end * hd;
    auto slice = [](const std::vector<float>& v, int64_t b, int64_t e) {
      return std::vector<float>(v.begin() + b, v.begin() + e);
    };
    for (LlamaLayer& L : layers_) {
      L.q = SliceRows(L.q, q0, q1);
      L.k = SliceRows(L.k, kv0, kv1);
      L.v = SliceRows(L.v, kv0, kv1);
      L.o = SliceCols(L.o, q0, q1, &shard_storage_);
      if (L.moe) {
        L.moe->TakeShard(part_, &shard_storage_);
      } else {
        L.gate = SliceRows(L.gate, part_.ffn_begin, part_.ffn_end);
        L.up = SliceRows(L.up, part_.ffn_begin, part_.ffn_end);
        L.down = SliceCols(L.down, part_.ffn_begin, part_.ffn_end, &shard_storage_);
      }
      if (!L.q_bias.empty()) {
        L.q_bias = slice(L.q_bias, q0, q1);
        L.k_bias = slice(L.k_bias, kv0, kv1);
        L.v_bias = slice(L.v_bias, kv0, kv1);
      }
    }
  }

  // Repacks the (sharded) matrices for the kernel plan (the int16 VNNI
  // kernels or the 8-row interleaved ones) and drops their file pages from
  // RSS. An untied embedding keeps reading the file's rows.
  void PackWeights() {
    auto pack = [&](kernels::cpu::WeightMatrix* w) {
      PackForKernelPlan(options_.kernel_plan, checkpoint(), w);
    };
    // The head first: while a matrix is packed its file pages are resident
    // too, and the head is the largest, so peak RSS stays at the packed size.
    pack(&head_);
    // A tied head: the embedding lookup reads the packed copy too.
    if (head_.data == embed_.data) embed_.packed = head_.packed;
    for (LlamaLayer& L : layers_) {
      for (kernels::cpu::WeightMatrix* w : {&L.q, &L.k, &L.v, &L.o}) pack(w);
      if (L.moe) {
        L.moe->PackWith(pack);
      } else {
        for (kernels::cpu::WeightMatrix* w : {&L.gate, &L.up, &L.down}) pack(w);
      }
    }
  }

  // Adapters run unsharded only (their B/A would need the same slicing),
  // and not on mixture-of-experts models (no per-expert adapters).
  bool SupportsLora() const override {
    return (options_.comm == nullptr || options_.comm->world_size() == 1) &&
           config().expert_count == 0;
  }

  // Sums the row-parallel partial outputs over the ranks (no-op alone).
  absl::Status ReduceAcrossRanks(float* data, int64_t count) {
    if (options_.comm == nullptr || options_.comm->world_size() == 1) return absl::OkStatus();
    return options_.comm->AllReduceSum(data, count);
  }

 protected:
  absl::Status ForwardValidated(const ForwardBatch& batch, PagedKvCache* cache,
                                ForwardOutput* out) override {
    const worker::loader::ModelConfig& c = config();
    const BatchLayout layout = LayoutBatch(batch);
    // This rank's share (the whole model when not tensor-parallel).
    const int num_heads = part_.num_heads(), num_kv_heads = part_.num_kv_heads();
    const int64_t n = layout.num_tokens, h = c.hidden_size, hd = c.head_dim,
                  qd = num_heads * hd, kvd = num_kv_heads * hd, f = part_.ffn_size();
    const float eps = static_cast<float>(c.rms_norm_eps);

    // Two buffers serve twice (RSS for long prefills): the normed input
    // xn also holds the attention output (q/k/v were read from it), and q
    // also holds the projections' outputs (attention has consumed it).
    x_.resize(n * h);
    xn_.resize(n * std::max(h, qd));
    q_.resize(n * std::max(h, qd));
    k_.resize(n * kvd);
    v_.resize(n * kvd);
    gate_.resize(std::min(n, kFfnTokens) * f);
    up_.resize(std::min(n, kFfnTokens) * f);
    float* const attn = xn_.data();
    float* const tmp = q_.data();
    const kernels::cpu::RopeLayout rope = c.rope_interleaved
                                              ? kernels::cpu::RopeLayout::kInterleaved
                                              : kernels::cpu::RopeLayout::kNeox;

    // Per-sequence LoRA updates (no-ops when no sequence has an adapter).
    const LoraTokenMap lora(batch);
    auto delta = [&](int64_t t0, int64_t m, int64_t layer, LoraModule module, const float* in,
                     float* out) { ApplyLora(lora, t0, m, layer, module, in, out, pool_); };

    // The first positions of a sequence get the int16 kernels' two-pass
    // activations (PrecisePositionMask).
    const std::vector<uint8_t> precise =
        PrecisePositionMask(options_.kernel_plan, layout.positions);
    const uint8_t* pm = precise.empty() ? nullptr : precise.data();
    auto pm_from = [&](int64_t t0) { return pm ? pm + t0 : nullptr; };
    EmbedTokens(embed_, layout.tokens, x_.data(), pool_);
    if (c.embedding_scale != 1.0) {
      kernels::cpu::Scale(x_.data(), static_cast<float>(c.embedding_scale), n * h, x_.data());
    }
    // Each residual add is fused with the norm after it (the next layer's
    // attn_norm for the MLP's add), one parallel pass over the tokens.
    AddRmsNorm(x_.data(), nullptr, layers_[0].attn_norm.data(), n, h, eps, xn_.data(), pool_);
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const LlamaLayer& L = layers_[l];
      // q, k and v read the same input: one parallel region for the three.
      const kernels::cpu::MatMulTarget qkv[] = {
          {&L.q, q_.data()}, {&L.k, k_.data()}, {&L.v, v_.data()}};
      kernels::cpu::MatMulShared(qkv, 3, xn_.data(), n, pool_, pm);
      delta(0, n, l, LoraModule::kQ, xn_.data(), q_.data());
      delta(0, n, l, LoraModule::kK, xn_.data(), k_.data());
      delta(0, n, l, LoraModule::kV, xn_.data(), v_.data());
      if (!L.q_bias.empty()) {
        AddBiasRows(q_.data(), L.q_bias.data(), n, qd);
        AddBiasRows(k_.data(), L.k_bias.data(), n, kvd);
        AddBiasRows(v_.data(), L.v_bias.data(), n, kvd);
      }
      if (!L.q_norm.empty()) {  // per head: rows of head_dim
        kernels::cpu::RmsNorm(q_.data(), L.q_norm.data(), n * num_heads, hd, eps, q_.data());
        kernels::cpu::RmsNorm(k_.data(), L.k_norm.data(), n * num_kv_heads, hd, eps, k_.data());
      }
      const RotaryTable& rotary = c.UsesLocalRope(l) ? local_rope_ : rope_;
      kernels::cpu::Rope(q_.data(), n, qd, num_heads, hd, c.RopeDim(), layout.positions.data(),
                         rotary.inv_freq.data(), rope, rotary.mscale);
      kernels::cpu::Rope(k_.data(), n, kvd, num_kv_heads, hd, c.RopeDim(), layout.positions.data(),
                         rotary.inv_freq.data(), rope, rotary.mscale);
      WriteKv(batch, layout, l, k_.data(), v_.data(), cache);
      const AttentionOptions attention{c.LayerWindow(l), static_cast<float>(c.attention_scale),
                                       static_cast<float>(c.attn_logit_softcap)};
      AttendAll(batch, layout, l, q_.data(), num_heads, cache, attn, pool_, attention);
      kernels::cpu::MatMul(L.o, attn, n, tmp, pool_, pm);
      delta(0, n, l, LoraModule::kO, attn, tmp);
      if (absl::Status s = ReduceAcrossRanks(tmp, n * h); !s.ok()) return s;
      if (!L.post_attn_norm.empty()) {
        AddRmsNorm(tmp, nullptr, L.post_attn_norm.data(), n, h, eps, tmp, pool_);
      }
      AddRmsNorm(x_.data(), tmp, L.ffn_norm.data(), n, h, eps, xn_.data(), pool_);

      // The MLP is per token, so it runs over slices of at most kFfnTokens
      // tokens (same results, MatMul being batch invariant): the two widest
      // buffers stay small however long the prefill.
      // A mixture-of-experts layer runs its experts instead (the loop below
      // is the dense MLP's); sharded, it leaves this rank's partial sum in
      // tmp like the dense down projection, for the same one all-reduce.
      if (L.moe) L.moe->Forward(xn_.data(), n, tmp, pool_, pm, &moe_scratch_);
      for (int64_t t0 = 0; !L.moe && t0 < n; t0 += kFfnTokens) {
        const int64_t m = std::min(kFfnTokens, n - t0);
        const kernels::cpu::MatMulTarget gate_up[] = {{&L.gate, gate_.data()}, {&L.up, up_.data()}};
        kernels::cpu::MatMulShared(gate_up, 2, xn_.data() + t0 * h, m, pool_, pm_from(t0));
        delta(t0, m, l, LoraModule::kGate, xn_.data() + t0 * h, gate_.data());
        delta(t0, m, l, LoraModule::kUp, xn_.data() + t0 * h, up_.data());
        if (gelu_mlp_) {
          GeGluParallel(gate_.data(), up_.data(), m * f, gate_.data(), pool_);
        } else {
          SwiGluParallel(gate_.data(), up_.data(), m * f, gate_.data(), pool_);
        }
        kernels::cpu::MatMul(L.down, gate_.data(), m, tmp + t0 * h, pool_, pm_from(t0));
        delta(t0, m, l, LoraModule::kDown, gate_.data(), tmp + t0 * h);
      }
      if (absl::Status s = ReduceAcrossRanks(tmp, n * h); !s.ok()) return s;
      if (!L.post_ffw_norm.empty()) {
        AddRmsNorm(tmp, nullptr, L.post_ffw_norm.data(), n, h, eps, tmp, pool_);
      }
      const float* next_norm = l + 1 < c.num_layers ? layers_[l + 1].attn_norm.data() : nullptr;
      AddRmsNorm(x_.data(), tmp, next_norm, n, h, eps, xn_.data(), pool_);
    }
    EmitHiddenStates(
        batch, layout, x_.data(), h,
        [&](float* r, int64_t m) { kernels::cpu::RmsNorm(r, output_norm_.data(), m, h, eps, r); },
        out);
    std::vector<float> rows = GatherLogitRows(layout, x_.data(), h);
    const int64_t nr = rows.size() / h;
    kernels::cpu::RmsNorm(rows.data(), output_norm_.data(), nr, h, eps, rows.data());
    ProjectLogits(batch, rows, head_, out, pool_);
    if (c.final_logit_softcap > 0.0) SoftCapLogits(static_cast<float>(c.final_logit_softcap), out);
    return absl::OkStatus();
  }

 private:
  kernels::cpu::WeightMatrix embed_, head_;
  std::vector<float> output_norm_;
  std::vector<LlamaLayer> layers_;
  RotaryTable rope_;        // every layer's, or Gemma 3's global layers'
  RotaryTable local_rope_;  // Gemma 3's sliding-window layers'
  bool gelu_mlp_ = false;  // GeGLU (Gemma) instead of SwiGLU
  TpPartition part_;
  // Dequantized column slices (only when a cut is not on a block boundary).
  std::vector<std::unique_ptr<kernels::cpu::AlignedFloats>> shard_storage_;
  // Scratch, reused across steps (sized to the largest batch seen), 64-byte
  // aligned for the matmul kernels.
  kernels::cpu::AlignedFloats x_, xn_, q_, k_, v_, gate_, up_;
  MoeScratch moe_scratch_;
  // Tokens per MLP slice: large enough for the matmul tiles, and keeps
  // gate_/up_ at a few MiB.
  static constexpr int64_t kFfnTokens = 256;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CausalLm>> CreateLlama(
    std::shared_ptr<const worker::loader::Checkpoint> checkpoint, kernels::cpu::ThreadPool* pool,
    const ModelOptions& options) {
  auto model = std::make_unique<Llama>(std::move(checkpoint), pool, options);
  absl::Status s = model->Bind();
  if (!s.ok()) return s;
  return std::unique_ptr<CausalLm>(std::move(model));
}

}  // namespace rill::worker
