#ifndef RILL_WORKER_LOADER_CHECKPOINT_H_
#define RILL_WORKER_LOADER_CHECKPOINT_H_

// A source-independent view of a model checkpoint (GGUF file or Hugging Face
// directory) for the model code: a normalized config plus tensors under
// canonical GGUF-style names without ".weight":
//   token_embd, output_norm[.bias], output (absent when tied), pos_embd (gpt2),
//   blk.N.attn_norm[.bias], blk.N.attn_q/k/v[.bias], blk.N.attn_output[.bias],
//   blk.N.attn_qkv[.bias] (gpt2), blk.N.ffn_norm[.bias], blk.N.ffn_gate,
//   blk.N.ffn_up[.bias], blk.N.ffn_down[.bias], blk.N.attn_q_norm and
//   blk.N.attn_k_norm (Qwen3, Gemma 3), blk.N.post_attention_norm and
//   blk.N.post_ffw_norm (Gemma 2/3; there blk.N.ffn_norm is HF's
//   pre_feedforward_layernorm), rope_factors_long / rope_factors_short
//   (LongRoPE). Phi-3's fused qkv_proj and gate_up_proj are presented split,
//   as row ranges of the fused tensor (no copy): attn_q/k/v, ffn_gate/up.
// Mixture-of-experts layers (ModelConfig::expert_count) have, instead of
//   ffn_gate/up/down: blk.N.ffn_gate_inp (router), blk.N.ffn_gate_exps.E,
//   blk.N.ffn_up_exps.E, blk.N.ffn_down_exps.E (expert E's 2-D matrices; a
//   GGUF file's 3-D expert tensors are split into these views), and with a
//   shared expert blk.N.ffn_gate_inp_shexp, blk.N.ffn_gate_shexp,
//   blk.N.ffn_up_shexp, blk.N.ffn_down_shexp.
// BERT encoders (architecture "bert") use llama.cpp's BERT names:
//   token_embd, pos_embd, token_types, token_embd_norm[.bias],
//   blk.N.attn_q/k/v[.bias], blk.N.attn_output[.bias],
//   blk.N.attn_output_norm[.bias], blk.N.ffn_up[.bias], blk.N.ffn_down[.bias],
//   blk.N.layer_output_norm[.bias].
// Other tensors of a GGUF file keep their name minus ".weight" (e.g.
// rope_freqs); unknown HF tensors are dropped.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/ggml_type.h"
#include "worker/loader/gguf.h"
#include "worker/loader/safetensors.h"

namespace rill::worker::loader {

struct RopeScaling {
  enum class Type { kNone, kLinear, kDynamic, kLlama3, kYarn, kLongrope };
  Type type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3.
  double high_freq_factor = 4.0;  // llama3.
  int64_t original_max_position_embeddings = 0;
  // longrope (Phi-3): per rotary pair, the divisors of the base frequencies
  // for contexts up to original_max_position_embeddings (short) and beyond
  // (long); cos and sin are multiplied by attention_factor. Rill picks one
  // set per model, not per step: long when max_position_embeddings exceeds
  // original_max_position_embeddings (see RopeInverseFrequencies).
  std::vector<double> short_factor, long_factor;
  double attention_factor = 1.0;
};

struct ModelConfig {
  // "llama" (also Qwen2/Qwen3/Mistral/Gemma 2/Gemma 3/Phi-3), "gpt2", or "bert" (an encoder: no head,
  // bidirectional attention; runs through worker/models/encoder.h).
  std::string architecture;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;  // Context length.
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  // Rotated features per head (partial_rotary_factor < 1, as in Phi-4-mini);
  // 0: all of head_dim.
  int64_t rope_dim = 0;
  // Gemma 3: the layers flagged here (its sliding-attention layers) rotate
  // with local_rope_theta / local_rope_scaling, the others with rope_theta /
  // rope_scaling. Empty: one RoPE for every layer.
  std::vector<bool> local_rope_layers;
  double local_rope_theta = 10000.0;
  RopeScaling local_rope_scaling;
  bool UsesLocalRope(int64_t layer) const {
    return layer < static_cast<int64_t>(local_rope_layers.size()) && local_rope_layers[layer];
  }
  int64_t RopeDim() const { return rope_dim > 0 ? rope_dim : head_dim; }
  double rms_norm_eps = 1e-5;    // llama.
  double layer_norm_eps = 1e-5;  // gpt2, bert.
  int64_t type_vocab_size = 0;   // bert: token type (segment) embeddings.
  // The pooling the model was trained with, as its files say: a GGUF's
  // <arch>.pooling_type, a sentence-transformers directory's Pooling
  // module. An embedding request that names no pooling gets it; kUnset
  // leaves the engine's default (MEAN for encoders, LAST for decoders).
  enum class Pooling { kUnset, kMean, kCls, kLast };
  Pooling pooling = Pooling::kUnset;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases present (Qwen2).
  // Qwen3: each query and key head is RMS-normalized (weights
  // blk.N.attn_q_norm / attn_k_norm, head_dim each, eps rms_norm_eps)
  // after the projection and before RoPE.
  bool qk_norm = false;
  // Gemma 2 and 3 (the defaults are Llama's behaviour):
  double embedding_scale = 1.0;     // token embeddings times this (sqrt(hidden))
  double norm_weight_offset = 0.0;  // RMSNorm weights applied as offset + w (HF: 1)
  std::string mlp_activation = "silu";  // gated MLP: "silu" or "gelu_tanh" (GeGLU)
  double attention_scale = 0.0;     // query scale; 0: 1 / sqrt(head_dim)
  double attn_logit_softcap = 0.0;  // scores -> cap * tanh(s / cap); 0: none
  double final_logit_softcap = 0.0;  // logits -> cap * tanh(l / cap); 0: none
  // blk.N.post_attention_norm / post_ffw_norm normalize the attention and MLP
  // outputs before their residual adds.
  bool post_norms = false;
  // True: rotary pairs are adjacent (x[2i], x[2i+1]) because llama.cpp's
  // converter permuted the q/k rows (GGUF "llama"). False: rotate_half pairs
  // (x[i], x[i + head_dim/2]) as in HF checkpoints and GGUF qwen2.
  bool rope_interleaved = false;
  // Sliding-window attention (Mistral; Qwen2 with use_sliding_window): a
  // windowed layer's query at position p attends only the keys at positions
  // > p - sliding_window. 0: no layer is windowed.
  int64_t sliding_window = 0;
  // Which layers are windowed when sliding_window > 0: empty means every
  // layer, else one flag per layer (Qwen2's max_window_layers, or
  // transformers' layer_types).
  std::vector<bool> sliding_layers;
  // The window of `layer` (0: full causal attention).
  int64_t LayerWindow(int64_t layer) const {
    if (sliding_window <= 0) return 0;
    if (sliding_layers.empty()) return sliding_window;
    return layer < static_cast<int64_t>(sliding_layers.size()) && sliding_layers[layer]
               ? sliding_window
               : 0;
  }
  // Mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE; worker/models/moe.h).
  // expert_count == 0: every layer has the dense MLP. Otherwise a MoE
  // layer's router (blk.N.ffn_gate_inp, [expert_count][hidden]) takes a
  // softmax over the experts, keeps the expert_used_count largest
  // probabilities (renormalized to sum 1 when expert_weights_norm) and sums
  // those experts' SwiGLU MLPs (blk.N.ffn_{gate,up,down}_exps.E, of
  // expert_intermediate_size features) weighted by them. With
  // shared_expert_intermediate_size > 0 (Qwen2-MoE) a shared SwiGLU MLP
  // (blk.N.ffn_{gate,up,down}_shexp) is added, scaled by
  // sigmoid(blk.N.ffn_gate_inp_shexp . x).
  int64_t expert_count = 0;
  int64_t expert_used_count = 0;
  int64_t expert_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  bool expert_weights_norm = false;
  // Which layers are MoE when expert_count > 0: empty means every layer,
  // else one flag per layer (Qwen2-MoE's mlp_only_layers and
  // decoder_sparse_step); the others have the dense MLP of intermediate_size.
  std::vector<bool> moe_layers;
  bool IsMoeLayer(int64_t layer) const {
    if (expert_count <= 0) return false;
    if (moe_layers.empty()) return true;
    return layer < static_cast<int64_t>(moe_layers.size()) && moe_layers[layer];
  }
  int64_t bos_token_id = -1;  // -1 when unknown.
  int64_t eos_token_id = -1;  // First of eos_token_ids.
  std::vector<int64_t> eos_token_ids;
  int64_t pad_token_id = -1;
};

struct TensorRef {
  kernels::cpu::GgmlType type;
  std::vector<int64_t> ne;  // ggml order: ne[0] = row length (input features).
  const void* data;
  size_t nbytes;
  // Always false from LoadCheckpoint: HF GPT-2 Conv1D weights ([in, out] on
  // disk) are materialized transposed into memory owned by the Checkpoint, so
  // every matrix has the same [in, out]-in-ggml-order layout.
  bool transposed = false;
};

struct TokenizerSource {
  // GGUF: metadata (tokenizer.ggml.*, tokenizer.chat_template) lives here.
  const GgufFile* gguf = nullptr;
  // HF: paths, empty when the file is absent.
  std::string tokenizer_json;
  std::string tokenizer_config_json;
  std::string generation_config_json;
};

class Checkpoint {
 public:
  enum class Format { kGguf, kSafetensors };

  const std::string& path() const { return path_; }
  Format format() const { return format_; }
  const ModelConfig& config() const { return config_; }
  const TokenizerSource& tokenizer() const { return tokenizer_; }

  const std::map<std::string, TensorRef>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorRef* Find(std::string_view canonical_name) const;
  // NotFound naming the tensor and the checkpoint when absent.
  absl::StatusOr<const TensorRef*> Get(std::string_view canonical_name) const;

  // Tells the OS that tensor bytes [p, p + n), copied elsewhere at load (the
  // CPU's packed weights), need not stay resident: GGUF files only, whose
  // pages come back from the file if read again.
  void ReleaseTensorPages(const void* p, size_t n) const {
    if (gguf_) gguf_->ReleasePages(p, n);
  }

  // The underlying file (null for the other format).
  const GgufFile* gguf() const { return gguf_.get(); }
  const SafetensorsShards* safetensors() const { return shards_.get(); }

 private:
  friend struct CheckpointBuilder;
  Checkpoint() = default;

  std::string path_;
  Format format_ = Format::kGguf;
  ModelConfig config_;
  TokenizerSource tokenizer_;
  std::map<std::string, TensorRef> tensors_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<SafetensorsShards> shards_;
  std::vector<std::unique_ptr<uint8_t[]>> owned_;  // Materialized transposes.
};

// `path` is a .gguf file or a Hugging Face directory (config.json +
// *.safetensors). Validates every expected tensor's presence and shape
// against the config; errors name the tensor.
absl::StatusOr<std::unique_ptr<Checkpoint>> LoadCheckpoint(const std::string& path);

}  // namespace rill::worker::loader

#endif  // RILL_WORKER_LOADER_CHECKPOINT_H_
