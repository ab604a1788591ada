// GGUF -> Checkpoint: config from "<arch>.*" metadata, tensors renamed by
// dropping ".weight" (position_embd -> pos_embd).

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

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

// Which layers slide, as llama.cpp's load_swa_pattern reads
// `key` (<arch>.attention.sliding_window_pattern): one flag per layer (bool
// or integer entries, as llama.cpp's model saver writes it), or a period n
// (layer i slides unless i % n == n - 1; 0: every layer). Absent: the
// architecture's period (Gemma 2: 2, Gemma 3: 6).
absl::StatusOr<std::vector<bool>> SlidingLayers(const GgufFile& f, const std::string& key,
                                                int64_t num_layers, int64_t default_period,
                                                const std::string& path) {
  std::vector<bool> layers;
  const GgufValue* v = f.Find(key);
  if (v != nullptr && v->type() == GgufValueType::kArray) {
    if (v->size() != static_cast<uint64_t>(num_layers)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", key, " has ", v->size(),
                                                     " entries, expected one per layer (",
                                                     num_layers, ")"));
    }
    for (uint64_t i = 0; i < v->size(); ++i) {
      const GgufValue e = v->At(i);
      std::optional<bool> flag = e.AsBool();
      if (!flag.has_value()) {
        std::optional<int64_t> n = e.AsInt64();
        if (n.has_value()) flag = *n != 0;
      }
      if (!flag.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": ", key, " must be a period or one bool or integer per layer, not an array of ",
            Sv(GgufValueTypeName(v->element_type()))));
      }
      layers.push_back(*flag);
    }
    return layers;
  }
  int64_t period = default_period;
  if (v != nullptr) {
    std::optional<int64_t> n = v->AsInt64();
    if (!n.has_value() || *n < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": ", key, " must be a period >= 0 or one bool or integer per layer"));
    }
    period = *n;
  }
  for (int64_t i = 0; i < num_layers; ++i) layers.push_back(period == 0 || i % period < period - 1);
  return layers;
}

// Llama-family metadata that changes the math: the sliding window is
// implemented; the rest has one supported value and is refused otherwise,
// never ignored.
absl::Status ReadLlamaFamilyExtras(const GgufFile& f, const std::string& arch,
                                   const std::string& path, ModelConfig* m) {
  const std::string p = arch + ".";
  const bool gemma2 = arch == "gemma2", gemma3 = arch == "gemma3";
  ASSIGN_OR_RETURN_(m->sliding_window,
                    IntOr(f, p + "attention.sliding_window", gemma2 || gemma3 ? 4096 : 0));
  if (m->sliding_window < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", p, "attention.sliding_window ", m->sliding_window, " < 0"));
  }
  int64_t rope_dim;
  ASSIGN_OR_RETURN_(rope_dim, IntOr(f, p + "rope.dimension_count", m->head_dim));
  if (arch == "phi3") {
    // Phi-4-mini rotates 3/4 of each head (partial_rotary_factor).
    if (rope_dim <= 0 || rope_dim > m->head_dim || rope_dim % 2 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": ", p, "rope.dimension_count ", rope_dim, " must be even and <= head_dim ",
          m->head_dim));
    }
    m->rope_dim = rope_dim;
  } else if (rope_dim != m->head_dim) {
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
  if (gemma2 || gemma3) {
    // As llama.cpp reads Gemma 2: soft-caps default to 50 / 30, every other
    // layer slides (from layer 0) unless attention.sliding_window_pattern
    // says otherwise (SlidingLayers), norms are stored as w + 1 already, and
    // queries are scaled by 1/sqrt(head_dim) (1/sqrt(hidden/heads) for the
    // 46-layer 27B, whose query_pre_attn_scalar GGUF does not carry).
    // Gemma 3: no soft-caps unless set; five sliding layers, then a global
    // one (by default); the sliding layers rotate with base 10000 unscaled, the global
    // ones with rope.freq_base and rope.scaling (both as llama.cpp fixes
    // them); 1/sqrt(hidden/heads) for the 62-layer 27B.
    ASSIGN_OR_RETURN_(m->attn_logit_softcap,
                      FloatOr(f, p + "attn_logit_softcapping", gemma3 ? 0.0 : 50.0));
    ASSIGN_OR_RETURN_(m->final_logit_softcap,
                      FloatOr(f, p + "final_logit_softcapping", gemma3 ? 0.0 : 30.0));
    ASSIGN_OR_RETURN_(m->sliding_layers,
                      SlidingLayers(f, p + "attention.sliding_window_pattern", m->num_layers,
                                    gemma3 ? 6 : 2, path));
    if (gemma3) {
      m->local_rope_layers = m->sliding_layers;
      m->local_rope_theta = 10000.0;
      m->qk_norm = true;
    }
    const int64_t big_layers = gemma3 ? 62 : 46;
    const double scalar = m->num_layers == big_layers && m->num_heads > 0
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

// A 1-D F32 tensor as doubles (LongRoPE's factors).
absl::StatusOr<std::vector<double>> F32Vector(const std::string& path, const GgufTensorInfo& t,
                                              int64_t n) {
  if (t.type != kernels::cpu::GgmlType::kF32 || t.ne.size() != 1 || t.ne[0] != n ||
      t.nbytes != static_cast<size_t>(n) * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", Sv(t.name),
                                                   "' must be F32 with ", n, " entries"));
  }
  std::vector<float> v(n);
  std::memcpy(v.data(), t.data, t.nbytes);
  return std::vector<double>(v.begin(), v.end());
}

// Phi-3 as llama.cpp's converter writes it: LongRoPE as the tensors
// rope_factors_long / rope_factors_short plus rope.scaling.attn_factor and
// rope.scaling.original_context_length; the MLP's gate and up projections
// fused into ffn_up (gate rows first), renamed ffn_gate_up here so that
// SplitFusedProjections cuts it as it cuts the HF gate_up_proj.
absl::Status ReadPhi3(const GgufFile& f, const std::string& path, ModelConfig* m,
                      std::map<std::string, TensorRef>* tensors) {
  const GgufTensorInfo* long_factors = f.FindTensor("rope_factors_long.weight");
  const GgufTensorInfo* short_factors = f.FindTensor("rope_factors_short.weight");
  if ((long_factors == nullptr) != (short_factors == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": rope_factors_long and rope_factors_short come together"));
  }
  if (long_factors != nullptr) {
    RopeScaling& sc = m->rope_scaling;
    if (sc.type != RopeScaling::Type::kNone && sc.type != RopeScaling::Type::kLongrope) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": LongRoPE factors with another rope.scaling.type"));
    }
    sc.type = RopeScaling::Type::kLongrope;
    ASSIGN_OR_RETURN_(sc.long_factor, F32Vector(path, *long_factors, m->RopeDim() / 2));
    ASSIGN_OR_RETURN_(sc.short_factor, F32Vector(path, *short_factors, m->RopeDim() / 2));
    if (sc.original_max_position_embeddings <= 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": LongRoPE needs phi3.rope.scaling.original_context_length > 1"));
    }
    // Files without the key get transformers' default, as the converter
    // computes it: sqrt(1 + ln(factor) / ln(original)), factor = context /
    // original.
    const double orig = static_cast<double>(sc.original_max_position_embeddings);
    const double factor = static_cast<double>(m->max_position_embeddings) / orig;
    ASSIGN_OR_RETURN_(
        sc.attention_factor,
        FloatOr(f, "phi3.rope.scaling.attn_factor",
                factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(orig))));
    tensors->erase("rope_factors_long");
    tensors->erase("rope_factors_short");
  }
  for (int64_t i = 0; i < m->num_layers; ++i) {
    const std::string b = absl::StrCat("blk.", i, ".");
    auto up = tensors->find(b + "ffn_up");
    if (up == tensors->end() || tensors->count(b + "ffn_gate") > 0) continue;
    if (up->second.ne.size() == 2 && up->second.ne[1] == 2 * m->intermediate_size) {
      (*tensors)[b + "ffn_gate_up"] = up->second;
      tensors->erase(up);
    }
  }
  return absl::OkStatus();
}

// The model's own pooling: <arch>.pooling_type as llama.cpp numbers it
// (0 none, 1 mean, 2 cls, 3 last, 4 rank). Rank means a reranker's
// classifier head, which Rill does not run: a BERT reranker is refused (all
// it could serve are embeddings where scores are meant); a decoder keeps no
// default pooling and still generates.
absl::Status ReadPooling(const GgufFile& f, const std::string& prefix, const std::string& path,
                         ModelConfig* m) {
  const std::string key = prefix + "pooling_type";
  if (f.Find(key) == nullptr) return absl::OkStatus();
  absl::StatusOr<int64_t> type = f.GetInt(key);
  if (!type.ok()) return type.status();
  switch (*type) {
    case 0: m->pooling = ModelConfig::Pooling::kUnset; return absl::OkStatus();
    case 1: m->pooling = ModelConfig::Pooling::kMean; return absl::OkStatus();
    case 2: m->pooling = ModelConfig::Pooling::kCls; return absl::OkStatus();
    case 3: m->pooling = ModelConfig::Pooling::kLast; return absl::OkStatus();
    case 4:
      if (m->architecture != "bert") return absl::OkStatus();
      break;
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": ", key, " ", *type,
      *type == 4 ? " (rank: a reranker's classifier head) is not supported"
                 : " is not a pooling type (0 none, 1 mean, 2 cls, 3 last)"));
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
      arch == "gemma2" || arch == "gemma3" || arch == "phi3" || arch == "qwen2moe" ||
      arch == "qwen3moe") {
    m.architecture = "llama";
  } else if (arch == "gpt2") {
    m.architecture = "gpt2";
  } else if (arch == "bert") {
    m.architecture = "bert";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": unsupported GGUF architecture '", ShortForMessage(arch),
                     "' (supported: llama (incl. Mixtral), mistral, qwen2, qwen2moe, qwen3, "
                     "qwen3moe, gemma2, gemma3, phi3, gpt2, bert)"));
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
    if (absl::Status s = ReadLlamaFamilyExtras(f, arch, path, &m); !s.ok()) {
      return s;
    }
    if (absl::Status s = ReadGgufMoeConfig(f, arch, path, &m); !s.ok()) return s;
  }
  if (absl::Status s = ReadPooling(f, p, path, &m); !s.ok()) return s;
  if (m.architecture == "bert") {
    // llama.cpp writes BERT's attention as non-causal; anything else is not BERT.
    if (f.Find(p + "attention.causal") != nullptr) {
      bool causal = false;
      ASSIGN_OR_RETURN_(causal, f.GetBool(p + "attention.causal"));
      if (causal) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": bert.attention.causal is true (BERT attends both ways)"));
      }
    }
    ASSIGN_OR_RETURN_(m.type_vocab_size, IntOr(f, "tokenizer.ggml.token_type_count", 2));
    m.attention_bias = true;
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
  m.qk_norm = m.qk_norm || arch == "qwen3" || arch == "qwen3moe" ||
              c->Find("blk.0.attn_q_norm") != nullptr;
  // llama.cpp permutes HF q/k rows only for the "llama" rope layout.
  m.rope_interleaved = arch == "llama" || arch == "mistral";
  if (arch == "phi3") {
    if (absl::Status s = ReadPhi3(f, path, &m, &c->tensors_); !s.ok()) return s;
    if (absl::Status s = SplitFusedProjections(c.get()); !s.ok()) return s;
  }

  c->gguf_ = std::move(*file);
  c->tokenizer_.gguf = c->gguf_.get();
  return c;
}

}  // namespace rill::worker::loader
