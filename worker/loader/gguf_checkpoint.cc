// GGUF -> Checkpoint: config from "<arch>.*" metadata, tensors renamed by
// dropping ".weight" (position_embd -> pos_embd).

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/message_text.h"
#include "worker/loader/checkpoint_internal.h"
#include "worker/loader/str_util.h"

namespace rill::worker::loader {
namespace {

// Optional integer key: `def` when absent, error when of the wrong type.
absl::StatusOr<int64_t> IntOr(const GgufFile& f, const std::string& key, int64_t def) {
  if (f.Find(key) == nullptr) return def;
  return f.GetInt(key);
}
absl::StatusOr<double> FloatOr(const GgufFile& f, const std::string& key, double def) {
  if (f.Find(key) == nullptr) return def;
  return f.GetFloat(key);
}

std::string CanonicalName(std::string_view gguf_name) {
  std::string name(gguf_name);
  if (absl::EndsWith(name, ".weight")) name.resize(name.size() - 7);
  if (name == "position_embd") return "pos_embd";
  if (absl::StartsWith(name, "position_embd.")) return "pos_embd" + name.substr(13);
  return name;
}

#define ASSIGN_OR_RETURN_(lhs, expr)   \
  {                                    \
    auto _v = (expr);                  \
    if (!_v.ok()) return _v.status();  \
    lhs = *_v;                         \
  }

// Llama-family metadata that changes the math: the sliding window is
// implemented; the rest has one supported value and is refused otherwise,
// never ignored.
absl::Status ReadLlamaFamilyExtras(const GgufFile& f, const std::string& p,
                                   const std::string& path, bool gemma2, ModelConfig* m) {
  ASSIGN_OR_RETURN_(m->sliding_window,
                    IntOr(f, p + "attention.sliding_window", gemma2 ? 4096 : 0));
  if (m->sliding_window < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", p, "attention.sliding_window ", m->sliding_window, " < 0"));
  }
  int64_t rope_dim;
  ASSIGN_OR_RETURN_(rope_dim, IntOr(f, p + "rope.dimension_count", m->head_dim));
  if (rope_dim != m->head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": partial rotary embeddings (", p, "rope.dimension_count ", rope_dim,
        " < head_dim ", m->head_dim, ") are not supported"));
  }
  int64_t value_dim;
  ASSIGN_OR_RETURN_(value_dim, IntOr(f, p + "attention.value_length", m->head_dim));
  if (value_dim != m->head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", p, "attention.value_length ", value_dim, " differs from the key length ",
        m->head_dim, " (not supported)"));
  }
  if (gemma2) {
    // As llama.cpp reads Gemma 2: soft-caps default to 50 / 30, every other
    // layer slides (from layer 0), norms are stored as w + 1 already, and
    // queries are scaled by 1/sqrt(head_dim) (1/sqrt(hidden/heads) for the
    // 46-layer 27B, whose query_pre_attn_scalar GGUF does not carry).
    ASSIGN_OR_RETURN_(m->attn_logit_softcap, FloatOr(f, p + "attn_logit_softcapping", 50.0));
    ASSIGN_OR_RETURN_(m->final_logit_softcap, FloatOr(f, p + "final_logit_softcapping", 30.0));
    m->sliding_layers.clear();
    for (int64_t i = 0; i < m->num_layers; ++i) m->sliding_layers.push_back(i % 2 == 0);
    const double scalar = m->num_layers == 46 && m->num_heads > 0
                              ? static_cast<double>(m->hidden_size / m->num_heads)
                              : static_cast<double>(m->head_dim);
    m->attention_scale = 1.0 / std::sqrt(scalar);
    m->embedding_scale = static_cast<float>(std::sqrt(static_cast<double>(m->hidden_size)));
    m->mlp_activation = "gelu_tanh";
    m->post_norms = true;
    return absl::OkStatus();
  }
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    if (f.Find(p + key) != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", p, key, " is not supported for this architecture"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> CheckpointBuilder::LoadGguf(const std::string& path) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  std::unique_ptr<Checkpoint> c = New();
  c->path_ = path;
  c->format_ = Checkpoint::Format::kGguf;
  const GgufFile& f = **file;

  std::string arch;
  ASSIGN_OR_RETURN_(arch, f.GetString("general.architecture"));
  ModelConfig& m = c->config_;
  if (arch == "llama" || arch == "mistral" || arch == "qwen2" || arch == "qwen3" ||
      arch == "gemma2" || arch == "qwen2moe" || arch == "qwen3moe") {
    m.architecture = "llama";
  } else if (arch == "gpt2") {
    m.architecture = "gpt2";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": unsupported GGUF architecture '", ShortForMessage(arch),
                     "' (supported: llama (incl. Mixtral), mistral, qwen2, qwen2moe, qwen3, "
                     "qwen3moe, gemma2, gpt2)"));
  }
  const std::string p = arch + ".";
  ASSIGN_OR_RETURN_(m.hidden_size, f.GetInt(p + "embedding_length"));
  ASSIGN_OR_RETURN_(m.num_layers, f.GetInt(p + "block_count"));
  ASSIGN_OR_RETURN_(m.num_heads, f.GetInt(p + "attention.head_count"));
  ASSIGN_OR_RETURN_(m.num_kv_heads, IntOr(f, p + "attention.head_count_kv", m.num_heads));
  ASSIGN_OR_RETURN_(m.intermediate_size, f.GetInt(p + "feed_forward_length"));
  ASSIGN_OR_RETURN_(m.max_position_embeddings, f.GetInt(p + "context_length"));
  ASSIGN_OR_RETURN_(m.head_dim, IntOr(f, p + "attention.key_length",
                                      m.num_heads > 0 ? m.hidden_size / m.num_heads : 0));
  ASSIGN_OR_RETURN_(m.rope_theta, FloatOr(f, p + "rope.freq_base", 10000.0));
  ASSIGN_OR_RETURN_(m.rms_norm_eps, FloatOr(f, p + "attention.layer_norm_rms_epsilon", 1e-5));
  ASSIGN_OR_RETURN_(m.layer_norm_eps, FloatOr(f, p + "attention.layer_norm_epsilon", 1e-5));
  if (m.architecture == "llama") {
    if (absl::Status s = ReadLlamaFamilyExtras(f, p, path, arch == "gemma2", &m); !s.ok()) {
      return s;
    }
    if (absl::Status s = ReadGgufMoeConfig(f, arch, path, &m); !s.ok()) return s;
  }

  // Rope scaling. Llama-3 style scaling is baked into a rope_freqs tensor by
  // llama.cpp, which is exposed as "rope_freqs"; the type stays kNone then.
  if (f.Find(p + "rope.scaling.type") != nullptr) {
    std::string_view type;
    ASSIGN_OR_RETURN_(type, f.GetString(p + "rope.scaling.type"));
    if (type == "linear") m.rope_scaling.type = RopeScaling::Type::kLinear;
    else if (type == "yarn") m.rope_scaling.type = RopeScaling::Type::kYarn;
    else if (type == "longrope") m.rope_scaling.type = RopeScaling::Type::kLongrope;
    else if (type != "none") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": unsupported rope scaling type '", Sv(type), "'"));
    }
    ASSIGN_OR_RETURN_(m.rope_scaling.factor, FloatOr(f, p + "rope.scaling.factor", 1.0));
  } else if (f.Find(p + "rope.scale_linear") != nullptr) {
    m.rope_scaling.type = RopeScaling::Type::kLinear;
    ASSIGN_OR_RETURN_(m.rope_scaling.factor, f.GetFloat(p + "rope.scale_linear"));
  }
  ASSIGN_OR_RETURN_(m.rope_scaling.original_max_position_embeddings,
                    IntOr(f, p + "rope.scaling.original_context_length", 0));

  ASSIGN_OR_RETURN_(m.bos_token_id, IntOr(f, "tokenizer.ggml.bos_token_id", -1));
  ASSIGN_OR_RETURN_(m.eos_token_id, IntOr(f, "tokenizer.ggml.eos_token_id", -1));
  ASSIGN_OR_RETURN_(m.pad_token_id, IntOr(f, "tokenizer.ggml.padding_token_id", -1));
  if (m.eos_token_id >= 0) m.eos_token_ids.push_back(m.eos_token_id);
  if (const GgufValue* eot = f.Find("tokenizer.ggml.eot_token_id"); eot != nullptr) {
    std::optional<int64_t> id = eot->AsInt64();
    if (id.has_value() && *id != m.eos_token_id) m.eos_token_ids.push_back(*id);
  }

  for (const GgufTensorInfo& t : f.tensors()) {
    c->tensors_[CanonicalName(t.name)] = TensorRef{t.type, t.ne, t.data, t.nbytes};
  }
  if (m.expert_count > 0) {
    if (absl::Status s = SplitExpertTensors(path, m.expert_count, &c->tensors_); !s.ok()) {
      return s;
    }
  }
  // Vocab: explicit key, else the token list, else the embedding rows.
  int64_t vocab = -1;
  ASSIGN_OR_RETURN_(vocab, IntOr(f, p + "vocab_size", -1));
  if (vocab < 0) {
    if (const GgufValue* tokens = f.Find("tokenizer.ggml.tokens");
        tokens != nullptr && tokens->type() == GgufValueType::kArray) {
      vocab = static_cast<int64_t>(tokens->size());
    } else if (const TensorRef* e = c->Find("token_embd"); e != nullptr && e->ne.size() == 2) {
      vocab = e->ne[1];
    }
  }
  m.vocab_size = vocab;
  m.tie_word_embeddings = c->Find("output") == nullptr;
  m.attention_bias = c->Find("blk.0.attn_q.bias") != nullptr;
  m.qk_norm = arch == "qwen3" || arch == "qwen3moe" || c->Find("blk.0.attn_q_norm") != nullptr;
  // llama.cpp permutes HF q/k rows only for the "llama" rope layout.
  m.rope_interleaved = arch == "llama" || arch == "mistral";

  c->gguf_ = std::move(*file);
  c->tokenizer_.gguf = c->gguf_.get();
  return c;
}

}  // namespace rill::worker::loader
