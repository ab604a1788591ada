// Mixture-of-experts checkpoints (Mixtral, Qwen2-MoE, Qwen3-MoE): their
// config keys in both formats, their tensor names, the per-expert views of
// GGUF's 3-D expert tensors, and the shapes the router and experts must have.
// Every MoE key that changes the math is read or refused, never ignored.

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/message_text.h"
#include "worker/loader/checkpoint_internal.h"

namespace rill::worker::loader {
namespace {

bool IsHfMoeType(const std::string& model_type) {
  return model_type == "mixtral" || model_type == "qwen2_moe" || model_type == "qwen3_moe";
}

// MoE keys of the families transformers knows; a model type that does not
// read one refuses it when it is set (non-null, non-zero, non-empty, true).
constexpr const char* kMoeKeys[] = {
    "num_local_experts",
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "norm_topk_prob",
    "decoder_sparse_step",
    "mlp_only_layers",
    "n_routed_experts",
    "n_shared_experts",
    "first_k_dense_replace",
    "moe_layer_freq",
    "routed_scaling_factor",
    "scoring_func",
    "topk_method",
    "n_group",
    "topk_group",
    "num_experts_per_token",
    "moe_topk",
};

bool IsSet(const base::json::JsonValue& v) {
  if (v.is_null()) return false;
  if (v.is_bool()) return v.bool_value();
  if (v.is_number()) return v.number_value() != 0.0;
  if (v.is_array()) return !v.array_items().empty();
  if (v.is_string()) return !v.string_value().empty();
  return true;
}

class MoeKeyReader {
 public:
  MoeKeyReader(const base::json::JsonValue& config, const std::string& path)
      : config_(config), path_(path) {}

  absl::StatusOr<int64_t> Int(const char* key, std::optional<int64_t> def) {
    read_.push_back(key);
    const base::json::JsonValue* v = config_.Find(key);
    if (v == nullptr || v->is_null()) {
      if (def.has_value()) return *def;
      return absl::InvalidArgumentError(absl::StrCat(path_, ": missing integer '", key, "'"));
    }
    std::optional<int64_t> i = v->AsInt64();
    if (!i.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": '", key, "' is not an integer"));
    }
    return *i;
  }
  absl::StatusOr<bool> Bool(const char* key, bool def) {
    read_.push_back(key);
    const base::json::JsonValue* v = config_.Find(key);
    if (v == nullptr || v->is_null()) return def;
    if (!v->is_bool()) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": '", key, "' is not a bool"));
    }
    return v->bool_value();
  }
  // A list of layer indices in [0, num_layers).
  absl::StatusOr<std::vector<int64_t>> Layers(const char* key, int64_t num_layers) {
    read_.push_back(key);
    std::vector<int64_t> out;
    const base::json::JsonValue* v = config_.Find(key);
    if (v == nullptr || v->is_null()) return out;
    if (!v->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": '", key, "' is not a list"));
    }
    for (const base::json::JsonValue& e : v->array_items()) {
      std::optional<int64_t> i = e.AsInt64();
      if (!i.has_value() || *i < 0 || *i >= num_layers) {
        return absl::InvalidArgumentError(
            absl::StrCat(path_, ": '", key, "' must list layer indices in [0, ", num_layers, ")"));
      }
      out.push_back(*i);
    }
    return out;
  }
  // InvalidArgument naming the first MoE key that is set but was not read.
  absl::Status RefuseUnread(const std::string& model_type) const {
    for (const char* key : kMoeKeys) {
      if (std::find(read_.begin(), read_.end(), std::string(key)) != read_.end()) continue;
      const base::json::JsonValue* v = config_.Find(key);
      if (v != nullptr && IsSet(*v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            path_, ": ", key, " is not supported for model_type '", ShortForMessage(model_type),
            "'", IsHfMoeType(model_type) ? "" : " (a mixture-of-experts key on a dense model)"));
      }
    }
    return absl::OkStatus();
  }

 private:
  const base::json::JsonValue& config_;
  const std::string& path_;
  std::vector<std::string> read_;
};

#define ASSIGN_OR_RETURN_(lhs, expr)  \
  {                                   \
    auto _v = (expr);                 \
    if (!_v.ok()) return _v.status(); \
    lhs = *_v;                        \
  }

absl::Status CheckExpertCounts(const std::string& path, const ModelConfig& m) {
  if (m.expert_count < 1 || m.expert_count > 4096 || m.expert_used_count < 1 ||
      m.expert_used_count > m.expert_count) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": mixture-of-experts needs 1 <= experts used per token (",
                     m.expert_used_count, ") <= experts (", m.expert_count, ") <= 4096"));
  }
  if (m.expert_intermediate_size <= 0 || m.shared_expert_intermediate_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": mixture-of-experts intermediate sizes must be > 0"));
  }
  return absl::OkStatus();
}

// "blk.N.<stem>.E" (llama.cpp's early per-expert Mixtral names) -> true with
// the parts, for stem ffn_gate / ffn_up / ffn_down.
bool SplitPerExpertName(const std::string& name, std::string* layer_prefix, std::string* stem,
                        int64_t* expert) {
  std::vector<std::string> parts = absl::StrSplit(name, '.');
  if (parts.size() != 4 || parts[0] != "blk") return false;
  if (parts[2] != "ffn_gate" && parts[2] != "ffn_up" && parts[2] != "ffn_down") return false;
  int64_t layer;
  if (!absl::SimpleAtoi(parts[1], &layer) || !absl::SimpleAtoi(parts[3], expert)) return false;
  *layer_prefix = absl::StrCat("blk.", layer, ".");
  *stem = parts[2];
  return true;
}

}  // namespace

absl::Status ReadHfMoeConfig(const base::json::JsonValue& config, const std::string& path,
                             const std::string& model_type, ModelConfig* m) {
  MoeKeyReader r(config, path);
  if (model_type == "mixtral") {
    ASSIGN_OR_RETURN_(m->expert_count, r.Int("num_local_experts", 8));
    ASSIGN_OR_RETURN_(m->expert_used_count, r.Int("num_experts_per_tok", 2));
    m->expert_intermediate_size = m->intermediate_size;
    m->expert_weights_norm = true;  // MixtralSparseMoeBlock renormalizes the top k
    // MixtralConfig's defaults where they differ from the Llama reader's.
    auto absent = [&](const char* key) {
      const base::json::JsonValue* v = config.Find(key);
      return v == nullptr || v->is_null();
    };
    if (absent("rope_theta") && absent("rope_parameters")) m->rope_theta = 1e6;
    if (absent("rms_norm_eps")) m->rms_norm_eps = 1e-5;
    if (absent("num_key_value_heads")) m->num_kv_heads = 8;
  } else if (model_type == "qwen2_moe" || model_type == "qwen3_moe") {
    const bool qwen2 = model_type == "qwen2_moe";
    // The config classes' defaults (Qwen1.5-MoE-A2.7B, Qwen3-30B-A3B).
    ASSIGN_OR_RETURN_(m->expert_count, r.Int("num_experts", qwen2 ? 60 : 128));
    ASSIGN_OR_RETURN_(m->expert_used_count, r.Int("num_experts_per_tok", qwen2 ? 4 : 8));
    ASSIGN_OR_RETURN_(m->expert_intermediate_size,
                      r.Int("moe_intermediate_size", qwen2 ? 1408 : 768));
    if (qwen2) {
      ASSIGN_OR_RETURN_(m->shared_expert_intermediate_size,
                        r.Int("shared_expert_intermediate_size", 5632));
      if (m->shared_expert_intermediate_size <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": shared_expert_intermediate_size must be > 0"));
      }
      bool qkv_bias;
      ASSIGN_OR_RETURN_(qkv_bias, r.Bool("qkv_bias", true));
      m->attention_bias = qkv_bias;
    }
    // False in both config classes; the released checkpoints say.
    ASSIGN_OR_RETURN_(m->expert_weights_norm, r.Bool("norm_topk_prob", false));
    int64_t step;
    ASSIGN_OR_RETURN_(step, r.Int("decoder_sparse_step", 1));
    if (step < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": decoder_sparse_step ", step, " must be >= 1"));
    }
    std::vector<int64_t> dense;
    ASSIGN_OR_RETURN_(dense, r.Layers("mlp_only_layers", m->num_layers));
    // transformers: layer i is sparse when it is not in mlp_only_layers and
    // (i + 1) % decoder_sparse_step == 0; the others have the dense MLP.
    m->moe_layers.clear();
    bool all = true;
    for (int64_t i = 0; i < m->num_layers; ++i) {
      const bool sparse =
          std::find(dense.begin(), dense.end(), i) == dense.end() && (i + 1) % step == 0;
      m->moe_layers.push_back(sparse);
      all = all && sparse;
    }
    if (all) m->moe_layers.clear();
    bool window;
    ASSIGN_OR_RETURN_(window, r.Bool("use_sliding_window", false));
    if (window) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": use_sliding_window is not supported for model_type '", model_type, "'"));
    }
  }
  if (absl::Status s = r.RefuseUnread(model_type); !s.ok()) return s;
  if (!IsHfMoeType(model_type)) return absl::OkStatus();
  return CheckExpertCounts(path, *m);
}

std::string MapHfMoeName(const std::string& hf_name) {
  static const char* const kPrefix = "model.layers.";
  if (!absl::StartsWith(hf_name, kPrefix)) return "";
  std::string rest = hf_name.substr(strlen(kPrefix));
  const size_t dot = rest.find('.');
  int64_t layer;
  if (dot == std::string::npos || !absl::SimpleAtoi(rest.substr(0, dot), &layer)) return "";
  std::string tail = rest.substr(dot + 1);
  const std::string blk = absl::StrCat("blk.", layer, ".");
  // transformers 5's fused experts (parameters, no ".weight"):
  // gate_up_proj [experts][2 * ffn][hidden] (gate rows first), down_proj
  // [experts][hidden][ffn].
  if (tail == "mlp.experts.gate_up_proj") return blk + "ffn_gate_up_exps";
  if (tail == "mlp.experts.down_proj") return blk + "ffn_down_exps";
  if (!absl::EndsWith(tail, ".weight")) return "";
  tail.resize(tail.size() - strlen(".weight"));
  static const std::pair<const char*, const char*> kFixed[] = {
      {"block_sparse_moe.gate", "ffn_gate_inp"},  // Mixtral
      {"mlp.gate", "ffn_gate_inp"},               // Qwen MoE
      {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},
      {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"},
      {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
      {"mlp.shared_expert.down_proj", "ffn_down_shexp"},
  };
  for (const auto& [hf, canon] : kFixed) {
    if (tail == hf) return blk + canon;
  }
  // <experts>.E.<projection>
  static const struct {
    const char* experts;
    const char* projection;
    const char* canon;
  } kExperts[] = {
      {"block_sparse_moe.experts.", "w1", "ffn_gate_exps"},
      {"block_sparse_moe.experts.", "w3", "ffn_up_exps"},
      {"block_sparse_moe.experts.", "w2", "ffn_down_exps"},
      {"mlp.experts.", "gate_proj", "ffn_gate_exps"},
      {"mlp.experts.", "up_proj", "ffn_up_exps"},
      {"mlp.experts.", "down_proj", "ffn_down_exps"},
  };
  for (const auto& e : kExperts) {
    if (!absl::StartsWith(tail, e.experts)) continue;
    const std::string after = tail.substr(strlen(e.experts));
    const size_t d = after.find('.');
    int64_t expert;
    if (d == std::string::npos || !absl::SimpleAtoi(after.substr(0, d), &expert)) continue;
    if (after.substr(d + 1) == e.projection) return absl::StrCat(blk, e.canon, ".", expert);
  }
  return "";
}

absl::Status ReadGgufMoeConfig(const GgufFile& f, const std::string& arch, const std::string& path,
                               ModelConfig* m) {
  const std::string p = arch + ".";
  auto int_or = [&](const std::string& key, int64_t def) -> absl::StatusOr<int64_t> {
    if (f.Find(key) == nullptr) return def;
    return f.GetInt(key);
  };
  ASSIGN_OR_RETURN_(m->expert_count, int_or(p + "expert_count", 0));
  const bool moe_arch = arch == "llama" || arch == "qwen2moe" || arch == "qwen3moe";
  if (m->expert_count <= 0) {
    if (arch == "qwen2moe" || arch == "qwen3moe") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", p, "expert_count is missing (a ", arch, " file needs it)"));
    }
    m->expert_count = 0;
    return absl::OkStatus();
  }
  if (!moe_arch) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": mixture-of-experts models (", p, "expert_count = ", m->expert_count,
                     ") are not supported for GGUF architecture '", ShortForMessage(arch),
                     "' (supported: llama (Mixtral), qwen2moe, qwen3moe)"));
  }
  if (f.Find(p + "expert_used_count") == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": mixture-of-experts file (", p,
                                                   "expert_count = ", m->expert_count, ") has no ",
                                                   p, "expert_used_count"));
  }
  ASSIGN_OR_RETURN_(m->expert_used_count, f.GetInt(p + "expert_used_count"));
  if (arch == "llama") {
    m->expert_intermediate_size = m->intermediate_size;  // Mixtral's experts
  } else {
    ASSIGN_OR_RETURN_(m->expert_intermediate_size,
                      int_or(p + "expert_feed_forward_length", m->intermediate_size));
  }
  if (arch == "qwen2moe") {
    ASSIGN_OR_RETURN_(m->shared_expert_intermediate_size,
                      int_or(p + "expert_shared_feed_forward_length", m->intermediate_size));
  } else if (f.Find(p + "expert_shared_feed_forward_length") != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", p, "expert_shared_feed_forward_length (shared experts) is not supported for ",
        arch));
  }
  // llama.cpp's rule: Mixtral and Qwen3-MoE renormalize the top k, Qwen2-MoE
  // does not, unless expert_weights_norm says.
  m->expert_weights_norm = arch != "qwen2moe";
  if (f.Find(p + "expert_weights_norm") != nullptr) {
    ASSIGN_OR_RETURN_(m->expert_weights_norm, f.GetBool(p + "expert_weights_norm"));
  }
  // Keys of other MoE designs, refused unless they hold the value these
  // families use.
  int64_t gating, dense_lead, shared_count;
  ASSIGN_OR_RETURN_(gating, int_or(p + "expert_gating_func", 1));
  if (gating != 1) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", p, "expert_gating_func ", gating,
                                                   " is not supported (only 1: softmax)"));
  }
  ASSIGN_OR_RETURN_(dense_lead, int_or(p + "leading_dense_block_count", 0));
  if (dense_lead != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", p, "leading_dense_block_count is not supported"));
  }
  ASSIGN_OR_RETURN_(shared_count, int_or(p + "expert_shared_count", arch == "qwen2moe" ? 1 : 0));
  if (shared_count != (arch == "qwen2moe" ? 1 : 0)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", p, "expert_shared_count ",
                                                   shared_count, " is not supported for ", arch));
  }
  if (f.Find(p + "expert_weights_scale") != nullptr) {
    double scale;
    ASSIGN_OR_RETURN_(scale, f.GetFloat(p + "expert_weights_scale"));
    if (scale != 1.0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", p, "expert_weights_scale ", scale,
                                                     " is not supported (only 1)"));
    }
  }
  return CheckExpertCounts(path, *m);
}

absl::Status SplitExpertTensors(const std::string& path, int64_t expert_count,
                                std::map<std::string, TensorRef>* tensors) {
  std::map<std::string, TensorRef> out;
  for (auto& [name, ref] : *tensors) {
    std::string layer_prefix, stem;
    int64_t expert;
    if (SplitPerExpertName(name, &layer_prefix, &stem, &expert)) {
      out[absl::StrCat(layer_prefix, stem, "_exps.", expert)] = ref;
      continue;
    }
    const bool fused = absl::StartsWith(name, "blk.") && absl::EndsWith(name, ".ffn_gate_up_exps");
    const bool stacked =
        absl::StartsWith(name, "blk.") &&
        (absl::EndsWith(name, ".ffn_gate_exps") || absl::EndsWith(name, ".ffn_up_exps") ||
         absl::EndsWith(name, ".ffn_down_exps") || fused);
    if (!stacked) {
      out[name] = ref;
      continue;
    }
    if (ref.ne.size() != 3 || ref.ne[2] != expert_count || ref.nbytes % expert_count != 0 ||
        (fused && (ref.ne[1] % 2 != 0 || ref.nbytes % (2 * expert_count) != 0))) {
      std::string shape;
      for (int64_t d : ref.ne) absl::StrAppend(&shape, shape.empty() ? "" : ", ", d);
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", name, "' has shape [",
                                                     shape, "], expected 3-D with ", expert_count,
                                                     " experts last"));
    }
    // Expert e's [rows][cols] matrix is the e-th of expert_count equal slabs.
    const size_t slab = ref.nbytes / expert_count;
    if (fused) {  // each slab: the gate's rows, then the up projection's
      const std::string stem = name.substr(0, name.size() - strlen("gate_up_exps"));
      for (int64_t e = 0; e < expert_count; ++e) {
        const uint8_t* base = static_cast<const uint8_t*>(ref.data) + e * slab;
        const std::vector<int64_t> ne = {ref.ne[0], ref.ne[1] / 2};
        out[absl::StrCat(stem, "gate_exps.", e)] = TensorRef{ref.type, ne, base, slab / 2};
        out[absl::StrCat(stem, "up_exps.", e)] = TensorRef{ref.type, ne, base + slab / 2, slab / 2};
      }
      continue;
    }
    for (int64_t e = 0; e < expert_count; ++e) {
      out[absl::StrCat(name, ".", e)] = TensorRef{
          ref.type, {ref.ne[0], ref.ne[1]}, static_cast<const uint8_t*>(ref.data) + e * slab, slab};
    }
  }
  *tensors = std::move(out);
  return absl::OkStatus();
}

absl::Status ValidateMoeLayer(const Checkpoint& c, int64_t layer) {
  const ModelConfig& m = c.config();
  const int64_t h = m.hidden_size, f = m.expert_intermediate_size;
  const std::string b = absl::StrCat("blk.", layer, ".");
  if (absl::Status s = ExpectTensorShape(c, b + "ffn_gate_inp", {h, m.expert_count}); !s.ok()) {
    return s;
  }
  for (int64_t e = 0; e < m.expert_count; ++e) {
    for (const char* stem : {"ffn_gate_exps.", "ffn_up_exps."}) {
      if (absl::Status s = ExpectTensorShape(c, absl::StrCat(b, stem, e), {h, f}); !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = ExpectTensorShape(c, absl::StrCat(b, "ffn_down_exps.", e), {f, h});
        !s.ok()) {
      return s;
    }
  }
  const int64_t fs = m.shared_expert_intermediate_size;
  if (fs > 0) {
    // The shared expert's gate is one row: stored [h] (GGUF) or [1][h] (HF).
    const TensorRef* g = c.Find(b + "ffn_gate_inp_shexp");
    if (g == nullptr || (g->ne != std::vector<int64_t>{h} && g->ne != std::vector<int64_t>{h, 1})) {
      return absl::InvalidArgumentError(absl::StrCat(
          c.path(), ": tensor '", b, "ffn_gate_inp_shexp' is missing or not of ", h, " elements"));
    }
    for (const auto& [name, ne] :
         {std::pair<const char*, std::vector<int64_t>>{"ffn_gate_shexp", {h, fs}},
          {"ffn_up_shexp", {h, fs}},
          {"ffn_down_shexp", {fs, h}}}) {
      if (absl::Status s = ExpectTensorShape(c, b + name, ne); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace rill::worker::loader
