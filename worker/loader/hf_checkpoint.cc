// Hugging Face directory (config.json + *.safetensors) -> Checkpoint.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "worker/loader/checkpoint_internal.h"
#include "base/json.h"
#include "base/message_text.h"

namespace rill::worker::loader {
namespace {

namespace fs = std::filesystem;

// The JSON value in `path` (any type); errors name the file.
absl::StatusOr<base::json::JsonValue> ReadJsonValue(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<base::json::JsonValue> v = base::json::ParseJson(ss.str());
  if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", v.status().message()));
  return v;
}

absl::StatusOr<base::json::JsonValue> ReadJsonFile(const std::string& path) {
  absl::StatusOr<base::json::JsonValue> v = ReadJsonValue(path);
  if (v.ok() && !v->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  return v;
}

// The pooling of a sentence-transformers directory: modules.json names a
// Pooling module whose config.json sets one pooling_mode_* flag. No
// modules.json (a plain transformers checkpoint): unset. Modes Rill does not
// compute (max, weighted mean) are refused rather than replaced.
absl::Status ReadSentenceTransformersPooling(const std::string& dir, ModelConfig* m) {
  std::error_code ec;
  const std::string modules_path = (fs::path(dir) / "modules.json").string();
  if (!fs::exists(modules_path, ec)) return absl::OkStatus();
  absl::StatusOr<base::json::JsonValue> modules = ReadJsonValue(modules_path);
  if (!modules.ok()) return modules.status();
  if (!modules->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(modules_path, ": not a JSON array of modules"));
  }
  for (const base::json::JsonValue& module : modules->array_items()) {
    const base::json::JsonValue* type = module.Find("type");
    const base::json::JsonValue* path = module.Find("path");
    if (type == nullptr || path == nullptr ||
        !absl::EndsWith(type->string_value(), "models.Pooling")) {
      continue;
    }
    const std::string config_path = (fs::path(dir) / path->string_value() / "config.json").string();
    absl::StatusOr<base::json::JsonValue> config = ReadJsonFile(config_path);
    if (!config.ok()) return config.status();
    auto on = [&](const char* key) {
      const base::json::JsonValue* v = config->Find(key);
      return v != nullptr && v->is_bool() && v->bool_value();
    };
    if (on("pooling_mode_cls_token")) {
      m->pooling = ModelConfig::Pooling::kCls;
    } else if (on("pooling_mode_mean_tokens")) {
      m->pooling = ModelConfig::Pooling::kMean;
    } else if (on("pooling_mode_lasttoken")) {
      m->pooling = ModelConfig::Pooling::kLast;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          config_path, ": pooling mode not supported (supported: cls_token, mean_tokens, lasttoken)"));
    }
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

// Reads config fields with defaults and type errors that name the key.
class ConfigReader {
 public:
  ConfigReader(const base::json::JsonValue& j, std::string path) : j_(j), path_(std::move(path)) {}

  absl::StatusOr<int64_t> Int(const char* key, std::optional<int64_t> def = std::nullopt) const {
    const base::json::JsonValue* v = j_.Find(key);
    if (v == nullptr || v->is_null()) {
      if (def.has_value()) return *def;
      return absl::InvalidArgumentError(absl::StrCat(path_, ": missing integer '", key, "'"));
    }
    std::optional<int64_t> i = v->AsInt64();
    if (!i.has_value()) return absl::InvalidArgumentError(absl::StrCat(path_, ": '", key, "' is not an integer"));
    return *i;
  }
  absl::StatusOr<double> Float(const base::json::JsonValue& obj, const char* key,
                               double def) const {
    const base::json::JsonValue* v = obj.Find(key);
    if (v == nullptr || v->is_null()) return def;
    if (!v->is_number()) return absl::InvalidArgumentError(absl::StrCat(path_, ": '", key, "' is not a number"));
    return v->number_value();
  }
  absl::StatusOr<double> Float(const char* key, double def) const { return Float(j_, key, def); }
  absl::StatusOr<std::optional<bool>> Bool(const char* key) const {
    const base::json::JsonValue* v = j_.Find(key);
    if (v == nullptr || v->is_null()) return std::optional<bool>();
    if (!v->is_bool()) return absl::InvalidArgumentError(absl::StrCat(path_, ": '", key, "' is not a bool"));
    return std::optional<bool>(v->bool_value());
  }
  // Token id fields may be an integer or a list of integers.
  absl::StatusOr<std::vector<int64_t>> Ids(const base::json::JsonValue& obj,
                                           const char* key) const {
    std::vector<int64_t> out;
    const base::json::JsonValue* v = obj.Find(key);
    if (v == nullptr || v->is_null()) return out;
    if (v->is_array()) {
      for (const base::json::JsonValue& e : v->array_items()) {
        std::optional<int64_t> i = e.AsInt64();
        if (!i.has_value()) return absl::InvalidArgumentError(absl::StrCat(path_, ": '", key, "' has a non-integer"));
        out.push_back(*i);
      }
      return out;
    }
    std::optional<int64_t> i = v->AsInt64();
    if (!i.has_value()) return absl::InvalidArgumentError(absl::StrCat(path_, ": '", key, "' is not an integer"));
    out.push_back(*i);
    return out;
  }
  const std::string& path() const { return path_; }

 private:
  const base::json::JsonValue& j_;
  std::string path_;
};

#define ASSIGN_OR_RETURN_(lhs, expr)   \
  {                                    \
    auto _v = (expr);                  \
    if (!_v.ok()) return _v.status();  \
    lhs = *_v;                         \
  }

// A list of numbers (LongRoPE's factors).
absl::StatusOr<std::vector<double>> Numbers(const ConfigReader& r,
                                            const base::json::JsonValue& obj, const char* key,
                                            const char* where) {
  std::vector<double> out;
  const base::json::JsonValue* v = obj.Find(key);
  if (v == nullptr || !v->is_array() || v->array_items().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.path(), ": ", where, ".", key, " must be a list of numbers"));
  }
  for (const base::json::JsonValue& e : v->array_items()) {
    if (!e.is_number() || !(e.number_value() > 0.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.path(), ": ", where, ".", key, " has an entry that is not a number > 0"));
    }
    out.push_back(e.number_value());
  }
  return out;
}

// How a model type lets its RoPE objects differ from Llama's.
struct RopeRules {
  bool longrope = false;  // Phi-3: rope_type longrope (older configs: su, yarn)
  // Where partial_rotary_factor goes; null: only 1 is accepted.
  double* partial_rotary_factor = nullptr;
};

// One RoPE description: transformers 5's `rope_parameters` or the older
// `rope_scaling` object. Every key must be one Rill implements for the
// object's rope type: a key that changes the frequencies and is not read
// here would otherwise be silently ignored.
absl::Status ReadRopeObject(const ConfigReader& r, const base::json::JsonValue& obj,
                            const char* where, double* theta, RopeScaling* out,
                            const RopeRules& rules = {}) {
  if (!obj.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(r.path(), ": ", where, " is not an object"));
  }
  const base::json::JsonValue* t = obj.Find("rope_type");
  if (t == nullptr) t = obj.Find("type");
  std::string type = t != nullptr && !t->is_null() ? t->string_value() : "default";
  // Phi3Config reads its first LongRoPE configs' names as longrope.
  if (rules.longrope && (type == "su" || type == "yarn")) type = "longrope";
  std::vector<std::string> keys = {"rope_type", "type", "rope_theta", "partial_rotary_factor"};
  if (type == "default" || type == "none") {
    out->type = RopeScaling::Type::kNone;
  } else if (type == "linear") {
    out->type = RopeScaling::Type::kLinear;
    keys.push_back("factor");
  } else if (type == "llama3") {
    out->type = RopeScaling::Type::kLlama3;
    keys.insert(keys.end(), {"factor", "low_freq_factor", "high_freq_factor",
                             "original_max_position_embeddings"});
  } else if (type == "longrope" && rules.longrope) {
    out->type = RopeScaling::Type::kLongrope;
    keys.insert(keys.end(), {"factor", "attention_factor", "short_factor", "long_factor",
                             "original_max_position_embeddings"});
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        r.path(), ": ", where, ".rope_type '", ShortForMessage(type),
        "' is not supported (supported: default, linear, llama3",
        rules.longrope ? ", longrope" : "", ")"));
  }
  for (const auto& [key, value] : obj.object_members()) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          r.path(), ": ", where, ".", ShortForMessage(key), " is not supported for rope_type '",
          type, "'"));
    }
  }
  double partial;
  ASSIGN_OR_RETURN_(partial, r.Float(obj, "partial_rotary_factor", 1.0));
  if (rules.partial_rotary_factor != nullptr && obj.Find("partial_rotary_factor") != nullptr) {
    *rules.partial_rotary_factor = partial;
  } else if (partial != 1.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        r.path(), ": ", where, ".partial_rotary_factor ", partial, " is not supported (only 1)"));
  }
  if (theta != nullptr) ASSIGN_OR_RETURN_(*theta, r.Float(obj, "rope_theta", *theta));
  ASSIGN_OR_RETURN_(out->factor, r.Float(obj, "factor", 1.0));
  ASSIGN_OR_RETURN_(out->low_freq_factor, r.Float(obj, "low_freq_factor", 1.0));
  ASSIGN_OR_RETURN_(out->high_freq_factor, r.Float(obj, "high_freq_factor", 4.0));
  double orig;
  ASSIGN_OR_RETURN_(orig, r.Float(obj, "original_max_position_embeddings", 0.0));
  out->original_max_position_embeddings = static_cast<int64_t>(orig);
  if (out->type == RopeScaling::Type::kLongrope) {
    ASSIGN_OR_RETURN_(out->short_factor, Numbers(r, obj, "short_factor", where));
    ASSIGN_OR_RETURN_(out->long_factor, Numbers(r, obj, "long_factor", where));
    // Unset (0) until ReadPhi3Rope derives them from the context lengths.
    ASSIGN_OR_RETURN_(out->attention_factor, r.Float(obj, "attention_factor", 0.0));
    if (obj.Find("factor") == nullptr) out->factor = 0.0;
  }
  if (out->type != RopeScaling::Type::kNone && out->type != RopeScaling::Type::kLongrope &&
      !(out->factor > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.path(), ": ", where, ".factor must be > 0"));
  }
  if (out->type == RopeScaling::Type::kLlama3 &&
      (out->original_max_position_embeddings <= 0 ||
       !(out->high_freq_factor > out->low_freq_factor) || !(out->low_freq_factor > 0.0))) {
    return absl::InvalidArgumentError(absl::StrCat(
        r.path(), ": ", where,
        " (llama3) needs original_max_position_embeddings > 0 and "
        "0 < low_freq_factor < high_freq_factor"));
  }
  return absl::OkStatus();
}

bool SameRope(const RopeScaling& a, const RopeScaling& b) {
  return a.type == b.type && a.factor == b.factor && a.low_freq_factor == b.low_freq_factor &&
         a.short_factor == b.short_factor && a.long_factor == b.long_factor &&
         a.attention_factor == b.attention_factor &&
         a.high_freq_factor == b.high_freq_factor &&
         a.original_max_position_embeddings == b.original_max_position_embeddings;
}

// A top-level number that, when present, must equal what rope_parameters says.
absl::Status CheckAgrees(const ConfigReader& r, const base::json::JsonValue& config,
                         const char* key, double value, const char* where) {
  const base::json::JsonValue* v = config.Find(key);
  if (v == nullptr || v->is_null() || (v->is_number() && v->number_value() == value)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(r.path(), ": ", key, " ", v->number_value(),
                                                 " disagrees with ", where, " ", value));
}

// Gemma 3 in transformers 5: rope_parameters {"full_attention": {...},
// "sliding_attention": {...}}; the sliding layers' entry is the local RoPE.
absl::Status ReadPerLayerTypeRope(const ConfigReader& r, const base::json::JsonValue& config,
                                  const base::json::JsonValue& params, ModelConfig* m) {
  for (const auto& [key, value] : params.object_members()) {
    if (key != "full_attention" && key != "sliding_attention") {
      return absl::InvalidArgumentError(absl::StrCat(
          r.path(), ": rope_parameters.", ShortForMessage(key),
          " is not a layer type Rill knows (full_attention, sliding_attention)"));
    }
  }
  const base::json::JsonValue* full = params.Find("full_attention");
  const base::json::JsonValue* sliding = params.Find("sliding_attention");
  if (full == nullptr || sliding == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        r.path(), ": rope_parameters needs both full_attention and sliding_attention"));
  }
  double theta = 1e6, local_theta = 1e4;
  if (absl::Status s = ReadRopeObject(r, *full, "rope_parameters.full_attention", &theta,
                                      &m->rope_scaling);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadRopeObject(r, *sliding, "rope_parameters.sliding_attention",
                                      &local_theta, &m->local_rope_scaling);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckAgrees(r, config, "rope_theta", theta,
                                   "rope_parameters.full_attention.rope_theta");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckAgrees(r, config, "rope_local_base_freq", local_theta,
                                   "rope_parameters.sliding_attention.rope_theta");
      !s.ok()) {
    return s;
  }
  m->rope_theta = theta;
  m->local_rope_theta = local_theta;
  return absl::OkStatus();
}

// Phi-3's rotary width and LongRoPE constants, as transformers derives
// them: int(head_dim * partial_rotary_factor) rotated features; the
// original context from the rope object, else the top-level key (Phi3Config
// default 4096); the attention factor, unless given, sqrt(1 + ln(factor) /
// ln(original)) with factor max_position_embeddings / original unless given.
absl::Status FinishPhi3Rope(const ConfigReader& r, double partial, ModelConfig* m) {
  if (!(partial > 0.0 && partial <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.path(), ": partial_rotary_factor ", partial, " must be in (0, 1]"));
  }
  m->rope_dim = static_cast<int64_t>(static_cast<double>(m->head_dim) * partial);
  if (m->rope_dim <= 0 || m->rope_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(r.path(), ": partial_rotary_factor ", partial,
                                                   " gives ", m->rope_dim,
                                                   " rotary dims (must be even and > 0)"));
  }
  RopeScaling& sc = m->rope_scaling;
  if (sc.type != RopeScaling::Type::kLongrope) return absl::OkStatus();
  if (sc.original_max_position_embeddings <= 0) {
    ASSIGN_OR_RETURN_(sc.original_max_position_embeddings,
                      r.Int("original_max_position_embeddings", 4096));
  }
  if (sc.original_max_position_embeddings <= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.path(), ": longrope needs original_max_position_embeddings > 1"));
  }
  const size_t pairs = static_cast<size_t>(m->rope_dim / 2);
  if (sc.short_factor.size() != pairs || sc.long_factor.size() != pairs) {
    return absl::InvalidArgumentError(absl::StrCat(
        r.path(), ": longrope short_factor and long_factor need ", pairs,
        " entries (one per rotary pair), not ", sc.short_factor.size(), " and ",
        sc.long_factor.size()));
  }
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  if (sc.factor <= 0.0) sc.factor = static_cast<double>(m->max_position_embeddings) / orig;
  if (sc.attention_factor <= 0.0) {
    sc.attention_factor =
        sc.factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(sc.factor) / std::log(orig));
  }
  return absl::OkStatus();
}

// RoPE theta and scaling from either config form: transformers 5 writes
// `rope_parameters` {rope_type, rope_theta, factor, ...}; older versions a
// top-level `rope_theta` plus a `rope_scaling` object. When both forms are
// present they must agree.
absl::Status ReadRope(const ConfigReader& r, const base::json::JsonValue& config,
                      const std::string& model_type, ModelConfig* m) {
  ASSIGN_OR_RETURN_(m->rope_theta,
                    r.Float("rope_theta", model_type == "gemma3_text" ? 1e6 : 10000.0));
  if (model_type == "gemma3_text") {
    // Older configs: rope_theta and rope_scaling are the global layers',
    // rope_local_base_freq the sliding layers' (never scaled).
    ASSIGN_OR_RETURN_(m->local_rope_theta, r.Float("rope_local_base_freq", 10000.0));
  }
  const bool phi3 = model_type == "phi3";
  double partial;
  ASSIGN_OR_RETURN_(partial, r.Float("partial_rotary_factor", 1.0));
  if (partial != 1.0 && !phi3) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.path(), ": partial_rotary_factor ", partial, " is not supported (only 1)"));
  }
  const RopeRules rules{.longrope = phi3, .partial_rotary_factor = phi3 ? &partial : nullptr};
  const base::json::JsonValue* legacy = config.Find("rope_scaling");
  if (legacy != nullptr && !legacy->is_null()) {
    if (absl::Status s =
            ReadRopeObject(r, *legacy, "rope_scaling", nullptr, &m->rope_scaling, rules);
        !s.ok()) {
      return s;
    }
  }
  const base::json::JsonValue* params = config.Find("rope_parameters");
  if (params == nullptr || params->is_null()) {
    return phi3 ? FinishPhi3Rope(r, partial, m) : absl::OkStatus();
  }
  if (params->is_object() && !params->object_members().empty() &&
      params->object_members().begin()->second.is_object()) {
    // Gemma 3 style: one object per layer type.
    if (model_type == "gemma3_text") return ReadPerLayerTypeRope(r, config, *params, m);
    return absl::InvalidArgumentError(absl::StrCat(
        r.path(), ": per-layer-type rope_parameters are not supported for model_type '",
        model_type, "'"));
  }
  if (model_type == "gemma3_text") {
    return absl::InvalidArgumentError(absl::StrCat(
        r.path(), ": gemma3 rope_parameters must name full_attention and sliding_attention"));
  }
  double theta = 10000.0;
  RopeScaling scaling;
  if (absl::Status s = ReadRopeObject(r, *params, "rope_parameters", &theta, &scaling, rules);
      !s.ok()) {
    return s;
  }
  const base::json::JsonValue* top_theta = config.Find("rope_theta");
  if (top_theta != nullptr && !top_theta->is_null() && m->rope_theta != theta) {
    return absl::InvalidArgumentError(absl::StrCat(r.path(), ": rope_theta ", m->rope_theta,
                                                   " disagrees with rope_parameters.rope_theta ",
                                                   theta));
  }
  if (legacy != nullptr && !legacy->is_null() && !SameRope(m->rope_scaling, scaling)) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.path(), ": rope_scaling disagrees with rope_parameters"));
  }
  m->rope_theta = theta;
  m->rope_scaling = scaling;
  return phi3 ? FinishPhi3Rope(r, partial, m) : absl::OkStatus();
}

// Sliding-window attention. Mistral windows every layer when
// `sliding_window` is set; Qwen2 only with `use_sliding_window`, and then
// the layers from `max_window_layers` on (transformers' rule); an explicit
// `layer_types` list says per layer. Llama has no window: a window there is
// refused rather than ignored.
absl::Status ReadSlidingWindow(const ConfigReader& r, const base::json::JsonValue& config,
                               const std::string& model_type, ModelConfig* m) {
  int64_t window;
  ASSIGN_OR_RETURN_(window, r.Int("sliding_window", 0));
  if (window < 0) {
    return absl::InvalidArgumentError(absl::StrCat(r.path(), ": sliding_window ", window, " < 0"));
  }
  std::vector<bool> layers;
  const base::json::JsonValue* types = config.Find("layer_types");
  if (types != nullptr && !types->is_null()) {
    if (!types->is_array() ||
        static_cast<int64_t>(types->array_items().size()) != m->num_layers) {
      return absl::InvalidArgumentError(absl::StrCat(
          r.path(), ": layer_types must be a list of num_hidden_layers (", m->num_layers,
          ") strings"));
    }
    for (const base::json::JsonValue& t : types->array_items()) {
      const std::string& v = t.string_value();
      if (v != "full_attention" && v != "sliding_attention") {
        return absl::InvalidArgumentError(absl::StrCat(
            r.path(), ": layer_types entry '", ShortForMessage(v),
            "' is not supported (supported: full_attention, sliding_attention)"));
      }
      layers.push_back(v == "sliding_attention");
    }
  }
  const bool any_sliding = std::find(layers.begin(), layers.end(), true) != layers.end();
  if (model_type == "llama") {
    if (window > 0 || any_sliding) {
      return absl::InvalidArgumentError(absl::StrCat(
          r.path(), ": model_type 'llama' has no sliding-window attention, but the config sets ",
          window > 0 ? "sliding_window" : "sliding_attention layers",
          " (use model_type 'mistral' or 'qwen2' for a windowed model)"));
    }
    return absl::OkStatus();
  }
  if (model_type == "gemma2") {
    // Gemma2Config: window 4096 unless set; layer i slides when (i + 1) % 2.
    if (config.Find("sliding_window") == nullptr) window = 4096;
    if (types == nullptr || types->is_null()) {
      for (int64_t i = 0; i < m->num_layers; ++i) layers.push_back((i + 1) % 2 != 0);
    }
  }
  if (model_type == "gemma3_text") {
    // Gemma3TextConfig: without layer_types, every sliding_window_pattern-th
    // layer (default 6) is global. The sliding layers also rotate with the
    // local RoPE, window or not.
    if (types == nullptr || types->is_null()) {
      int64_t pattern;
      ASSIGN_OR_RETURN_(pattern, r.Int("sliding_window_pattern", 6));
      if (pattern <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(r.path(), ": sliding_window_pattern ", pattern, " must be > 0"));
      }
      for (int64_t i = 0; i < m->num_layers; ++i) layers.push_back((i + 1) % pattern != 0);
    }
    m->local_rope_layers = layers;
    std::optional<bool> bidirectional;
    ASSIGN_OR_RETURN_(bidirectional, r.Bool("use_bidirectional_attention"));
    if (bidirectional.value_or(false)) {
      return absl::InvalidArgumentError(absl::StrCat(
          r.path(), ": use_bidirectional_attention (an encoder) is not supported"));
    }
  }
  if (model_type == "qwen2" || model_type == "qwen3") {
    std::optional<bool> use;
    ASSIGN_OR_RETURN_(use, r.Bool("use_sliding_window"));
    if (!use.value_or(false)) window = 0;
    if (window > 0 && types == nullptr) {
      int64_t first;
      ASSIGN_OR_RETURN_(first, r.Int("max_window_layers", 28));
      for (int64_t i = 0; i < m->num_layers; ++i) layers.push_back(i >= first);
    }
  }
  if (types != nullptr && !types->is_null() && !any_sliding) window = 0;
  m->sliding_window = window;
  m->sliding_layers = window > 0 ? std::move(layers) : std::vector<bool>();
  return absl::OkStatus();
}

// A number key of Gemma2Config / Gemma3TextConfig: its class default when
// absent, 0 when null (soft-capping off).
absl::StatusOr<double> GemmaNumber(const ConfigReader& r, const base::json::JsonValue& config,
                                    const char* key, double class_default) {
  const base::json::JsonValue* v = config.Find(key);
  if (v == nullptr) return class_default;
  if (v->is_null()) return 0.0;
  return r.Float(key, class_default);
}

// Gemma 2's and 3's extras over the Llama layout, with their config classes'
// defaults (Gemma 3 has no soft-capping unless set, and q/k norms).
absl::Status ReadGemma(const ConfigReader& r, const base::json::JsonValue& config, bool gemma3,
                       ModelConfig* m) {
  const base::json::JsonValue* act = config.Find("hidden_activation");
  if (act == nullptr || act->is_null()) act = config.Find("hidden_act");
  const std::string act_name =
      act != nullptr && !act->is_null() ? act->string_value() : "gelu_pytorch_tanh";
  if (act_name != "gelu_pytorch_tanh") {
    return absl::InvalidArgumentError(absl::StrCat(
        r.path(), ": gemma hidden_activation '", ShortForMessage(act_name),
        "' is not supported (supported: gelu_pytorch_tanh)"));
  }
  m->mlp_activation = "gelu_tanh";
  double scalar;
  ASSIGN_OR_RETURN_(scalar, GemmaNumber(r, config, "query_pre_attn_scalar", 256.0));
  if (!(scalar > 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat(r.path(), ": query_pre_attn_scalar must be > 0"));
  }
  m->attention_scale = 1.0 / std::sqrt(scalar);
  ASSIGN_OR_RETURN_(m->attn_logit_softcap,
                    GemmaNumber(r, config, "attn_logit_softcapping", gemma3 ? 0.0 : 50.0));
  ASSIGN_OR_RETURN_(m->final_logit_softcap,
                    GemmaNumber(r, config, "final_logit_softcapping", gemma3 ? 0.0 : 30.0));
  if (m->attn_logit_softcap < 0.0 || m->final_logit_softcap < 0.0) {
    return absl::InvalidArgumentError(absl::StrCat(r.path(), ": negative logit soft-capping"));
  }
  // HF multiplies by sqrt(hidden_size) rounded to the activations' dtype.
  m->embedding_scale = static_cast<float>(std::sqrt(static_cast<double>(m->hidden_size)));
  m->norm_weight_offset = 1.0;
  m->post_norms = true;
  m->qk_norm = gemma3;
  return absl::OkStatus();
}

// Llama-family keys that change the math and have one supported value.
absl::Status CheckLlamaFamilyKeys(const ConfigReader& r, const base::json::JsonValue& config) {
  const base::json::JsonValue* act = config.Find("hidden_act");
  if (act != nullptr && !act->is_null() && act->string_value() != "silu") {
    return absl::InvalidArgumentError(absl::StrCat(
        r.path(), ": hidden_act '", ShortForMessage(act->string_value()),
        "' is not supported (supported: silu)"));
  }
  std::optional<bool> mlp_bias;
  ASSIGN_OR_RETURN_(mlp_bias, r.Bool("mlp_bias"));
  if (mlp_bias.value_or(false)) {
    return absl::InvalidArgumentError(absl::StrCat(r.path(), ": mlp_bias is not supported"));
  }
  return absl::OkStatus();
}

// HF name -> canonical name, or "" to drop. `conv1d` is set for GPT-2 Conv1D
// weights stored [in, out].
std::string MapLlamaName(const std::string& n);

// Gemma 2 names its norms differently: post_attention_layernorm normalizes
// the attention output (Llama's name for the pre-MLP norm).
std::string MapGemma2Name(const std::string& n) {
  static const std::pair<const char*, const char*> kNorms[] = {
      {".post_attention_layernorm.weight", ".post_attention_norm"},
      {".pre_feedforward_layernorm.weight", ".ffn_norm"},
      {".post_feedforward_layernorm.weight", ".post_ffw_norm"},
  };
  for (const auto& [hf, gg] : kNorms) {
    if (absl::StartsWith(n, "model.layers.") && absl::EndsWith(n, hf)) {
      const std::string layer = n.substr(13, n.size() - 13 - strlen(hf));
      int64_t i;
      if (absl::SimpleAtoi(layer, &i)) return absl::StrCat("blk.", i, gg);
    }
  }
  return MapLlamaName(n);
}

std::string MapLlamaName(const std::string& n) {
  if (n == "model.embed_tokens.weight") return "token_embd";
  if (n == "model.norm.weight") return "output_norm";
  if (n == "lm_head.weight") return "output";
  static const char* const kPrefix = "model.layers.";
  if (!absl::StartsWith(n, kPrefix)) return "";
  std::string rest = n.substr(strlen(kPrefix));
  size_t dot = rest.find('.');
  int64_t layer;
  if (dot == std::string::npos || !absl::SimpleAtoi(rest.substr(0, dot), &layer)) return "";
  std::string tail = rest.substr(dot + 1);
  std::string suffix;
  if (absl::EndsWith(tail, ".weight")) {
    tail.resize(tail.size() - 7);
  } else if (absl::EndsWith(tail, ".bias")) {
    tail.resize(tail.size() - 5);
    suffix = ".bias";
  } else {
    return "";
  }
  static const std::pair<const char*, const char*> kMap[] = {
      {"input_layernorm", "attn_norm"},   {"self_attn.q_proj", "attn_q"},
      {"self_attn.k_proj", "attn_k"},     {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"}, {"post_attention_layernorm", "ffn_norm"},
      {"mlp.gate_proj", "ffn_gate"},      {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},
      {"self_attn.q_norm", "attn_q_norm"}, {"self_attn.k_norm", "attn_k_norm"},
      // Phi-3's fused projections (split by SplitFusedProjections).
      {"self_attn.qkv_proj", "attn_qkv"}, {"mlp.gate_up_proj", "ffn_gate_up"},
  };
  for (const auto& [hf, gg] : kMap) {
    if (tail == hf) return absl::StrCat("blk.", layer, ".", gg, suffix);
  }
  return "";
}

std::string MapGpt2Name(std::string n, bool* conv1d) {
  *conv1d = false;
  if (absl::StartsWith(n, "transformer.")) n = n.substr(12);
  if (n == "wte.weight") return "token_embd";
  if (n == "wpe.weight") return "pos_embd";
  if (n == "ln_f.weight") return "output_norm";
  if (n == "ln_f.bias") return "output_norm.bias";
  if (!absl::StartsWith(n, "h.")) return "";
  std::string rest = n.substr(2);
  size_t dot = rest.find('.');
  int64_t layer;
  if (dot == std::string::npos || !absl::SimpleAtoi(rest.substr(0, dot), &layer)) return "";
  std::string tail = rest.substr(dot + 1);
  static const struct {
    const char* hf;
    const char* gg;
    bool conv1d;
  } kMap[] = {
      {"ln_1", "attn_norm", false},      {"attn.c_attn", "attn_qkv", true},
      {"attn.c_proj", "attn_output", true}, {"ln_2", "ffn_norm", false},
      {"mlp.c_fc", "ffn_up", true},      {"mlp.c_proj", "ffn_down", true},
  };
  for (const auto& e : kMap) {
    if (tail == absl::StrCat(e.hf, ".weight")) {
      *conv1d = e.conv1d;
      return absl::StrCat("blk.", layer, ".", e.gg);
    }
    if (tail == absl::StrCat(e.hf, ".bias")) return absl::StrCat("blk.", layer, ".", e.gg, ".bias");
  }
  return "";  // attn.bias / attn.masked_bias are causal-mask buffers.
}

std::string MapBertName(std::string n) {
  if (absl::StartsWith(n, "bert.")) n = n.substr(5);
  std::string suffix;
  if (absl::EndsWith(n, ".weight")) {
    n.resize(n.size() - 7);
  } else if (absl::EndsWith(n, ".bias")) {
    n.resize(n.size() - 5);
    suffix = ".bias";
  } else {
    return "";  // embeddings.position_ids is an index buffer.
  }
  if (n == "embeddings.word_embeddings") return "token_embd";
  if (n == "embeddings.position_embeddings") return "pos_embd";
  if (n == "embeddings.token_type_embeddings") return "token_types";
  if (n == "embeddings.LayerNorm") return "token_embd_norm" + suffix;
  static const char* const kPrefix = "encoder.layer.";
  if (!absl::StartsWith(n, kPrefix)) return "";  // pooler.*: unused.
  std::string rest = n.substr(strlen(kPrefix));
  size_t dot = rest.find('.');
  int64_t layer;
  if (dot == std::string::npos || !absl::SimpleAtoi(rest.substr(0, dot), &layer)) return "";
  const std::string tail = rest.substr(dot + 1);
  static const std::pair<const char*, const char*> kMap[] = {
      {"attention.self.query", "attn_q"},
      {"attention.self.key", "attn_k"},
      {"attention.self.value", "attn_v"},
      {"attention.output.dense", "attn_output"},
      {"attention.output.LayerNorm", "attn_output_norm"},
      {"intermediate.dense", "ffn_up"},
      {"output.dense", "ffn_down"},
      {"output.LayerNorm", "layer_output_norm"},
  };
  for (const auto& [hf, gg] : kMap) {
    if (tail == hf) return absl::StrCat("blk.", layer, ".", gg, suffix);
  }
  return "";
}

base::json::JsonValue Num(double v) { return base::json::JsonValue::Number(v, absl::StrCat(v)); }

// A Gemma 3 config as Gemma3TextConfig reads it: the class defaults, then
// the config's own keys (later members win in JsonValue::Find). A "gemma3"
// (multimodal) config's text_config is read the same way, over its
// top-level keys (token ids, tie_word_embeddings); its vision tower is not
// loaded. Real configs omit keys that have the default (a Gemma 3 4B
// text_config has no num_attention_heads), so the defaults matter. The RoPE
// bases' defaults (1e6 global, 1e4 local) are ReadRope's: a default here
// would look like a top-level key to compare rope_parameters with.
absl::StatusOr<base::json::JsonValue> Gemma3TextConfig(const std::string& path,
                                                       const base::json::JsonValue& config) {
  using base::json::JsonValue;
  std::vector<JsonValue::Member> merged = {
      {"vocab_size", Num(262208)},
      {"hidden_size", Num(2304)},
      {"intermediate_size", Num(9216)},
      {"num_hidden_layers", Num(26)},
      {"num_attention_heads", Num(8)},
      {"num_key_value_heads", Num(4)},
      {"head_dim", Num(256)},
      {"max_position_embeddings", Num(131072)},
      {"rms_norm_eps", Num(1e-6)},
      {"query_pre_attn_scalar", Num(256)},
      {"sliding_window", Num(4096)},
      {"tie_word_embeddings", JsonValue::Bool(true)},
      {"bos_token_id", Num(2)},
      {"eos_token_id", Num(1)},
      {"pad_token_id", Num(0)},
  };
  const JsonValue* text = nullptr;
  if (const JsonValue* type = config.Find("model_type");
      type != nullptr && type->string_value() == "gemma3") {
    text = config.Find("text_config");
    if (text == nullptr || !text->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": model_type 'gemma3' without a text_config object"));
    }
  }
  for (const JsonValue::Member& member : config.object_members()) {
    if (member.first != "text_config" && member.first != "vision_config") merged.push_back(member);
  }
  if (text != nullptr) {
    for (const JsonValue::Member& member : text->object_members()) merged.push_back(member);
  }
  merged.push_back({"model_type", JsonValue::String("gemma3_text")});
  return JsonValue::Object(std::move(merged));
}

// Gemma 3 checkpoints saved from Gemma3ForConditionalGeneration nest the
// text model ("language_model.model.*" before transformers 4.52,
// "model.language_model.*" since): the Llama names under "model.".
std::string UnnestGemma3Name(const std::string& n) {
  for (const char* prefix : {"language_model.model.", "model.language_model."}) {
    if (absl::StartsWith(n, prefix)) return absl::StrCat("model.", n.substr(strlen(prefix)));
  }
  if (n == "language_model.lm_head.weight") return "lm_head.weight";
  return n;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> CheckpointBuilder::LoadHf(const std::string& dir) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  absl::StatusOr<base::json::JsonValue> config = ReadJsonFile(config_path);
  if (!config.ok()) return config.status();
  const base::json::JsonValue* type_value = config->Find("model_type");
  if (type_value != nullptr &&
      (type_value->string_value() == "gemma3" || type_value->string_value() == "gemma3_text")) {
    config = Gemma3TextConfig(config_path, *config);
    if (!config.ok()) return config.status();
  }
  std::unique_ptr<Checkpoint> c = New();
  c->path_ = dir;
  c->format_ = Checkpoint::Format::kSafetensors;
  ModelConfig& m = c->config_;
  ConfigReader r(*config, config_path);

  const std::string model_type = config->Find("model_type") != nullptr
                                     ? config->Find("model_type")->string_value()
                                     : "";
  std::optional<bool> tie;
  const bool moe = model_type == "mixtral" || model_type == "qwen2_moe" ||
                   model_type == "qwen3_moe";
  const bool gemma = model_type == "gemma2" || model_type == "gemma3_text";
  if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2" ||
      model_type == "qwen3" || model_type == "phi3" || gemma || moe) {
    m.architecture = "llama";
    ASSIGN_OR_RETURN_(m.vocab_size, r.Int("vocab_size"));
    ASSIGN_OR_RETURN_(m.hidden_size, r.Int("hidden_size"));
    ASSIGN_OR_RETURN_(m.num_layers, r.Int("num_hidden_layers"));
    ASSIGN_OR_RETURN_(m.num_heads, r.Int("num_attention_heads"));
    ASSIGN_OR_RETURN_(m.num_kv_heads, r.Int("num_key_value_heads", m.num_heads));
    ASSIGN_OR_RETURN_(m.head_dim, r.Int("head_dim", m.num_heads > 0 ? m.hidden_size / m.num_heads : 0));
    ASSIGN_OR_RETURN_(m.intermediate_size, r.Int("intermediate_size"));
    ASSIGN_OR_RETURN_(m.max_position_embeddings, r.Int("max_position_embeddings"));
    ASSIGN_OR_RETURN_(m.rms_norm_eps, r.Float("rms_norm_eps", 1e-6));
    if (absl::Status s = ReadRope(r, *config, model_type, &m); !s.ok()) return s;
    // Mixtral's attention is Mistral's; the Qwen MoE families refuse a
    // window in ReadHfMoeConfig.
    const std::string attention_type = model_type == "mixtral"     ? "mistral"
                                       : model_type == "qwen2_moe" ? "qwen2"
                                       : model_type == "qwen3_moe" ? "qwen3"
                                                                   : model_type;
    if (absl::Status s = ReadSlidingWindow(r, *config, attention_type, &m); !s.ok()) return s;
    if (gemma) {
      if (absl::Status s = ReadGemma(r, *config, model_type == "gemma3_text", &m); !s.ok()) {
        return s;
      }
    } else if (absl::Status s = CheckLlamaFamilyKeys(r, *config); !s.ok()) {
      return s;
    }
    std::optional<bool> bias;
    ASSIGN_OR_RETURN_(bias, r.Bool("attention_bias"));
    m.attention_bias = bias.value_or(model_type == "qwen2");
    if (absl::Status s = ReadHfMoeConfig(*config, config_path, model_type, &m); !s.ok()) return s;
    ASSIGN_OR_RETURN_(tie, r.Bool("tie_word_embeddings"));
    if (model_type == "gemma2" && !tie.has_value()) tie = true;  // Gemma2Config's default
  } else if (model_type == "gpt2") {
    m.architecture = "gpt2";
    ASSIGN_OR_RETURN_(m.vocab_size, r.Int("vocab_size"));
    ASSIGN_OR_RETURN_(m.hidden_size, r.Int("n_embd"));
    ASSIGN_OR_RETURN_(m.num_layers, r.Int("n_layer"));
    ASSIGN_OR_RETURN_(m.num_heads, r.Int("n_head"));
    m.num_kv_heads = m.num_heads;
    m.head_dim = m.num_heads > 0 ? m.hidden_size / m.num_heads : 0;
    ASSIGN_OR_RETURN_(m.intermediate_size, r.Int("n_inner", 4 * m.hidden_size));
    ASSIGN_OR_RETURN_(m.max_position_embeddings, r.Int("n_positions"));
    ASSIGN_OR_RETURN_(m.layer_norm_eps, r.Float("layer_norm_epsilon", 1e-5));
    m.attention_bias = true;
    ASSIGN_OR_RETURN_(tie, r.Bool("tie_word_embeddings"));
    if (!tie.has_value()) tie = true;  // GPT-2 always ties.
  } else if (model_type == "bert") {
    m.architecture = "bert";
    ASSIGN_OR_RETURN_(m.vocab_size, r.Int("vocab_size"));
    ASSIGN_OR_RETURN_(m.hidden_size, r.Int("hidden_size"));
    ASSIGN_OR_RETURN_(m.num_layers, r.Int("num_hidden_layers"));
    ASSIGN_OR_RETURN_(m.num_heads, r.Int("num_attention_heads"));
    m.num_kv_heads = m.num_heads;
    m.head_dim = m.num_heads > 0 ? m.hidden_size / m.num_heads : 0;
    ASSIGN_OR_RETURN_(m.intermediate_size, r.Int("intermediate_size"));
    ASSIGN_OR_RETURN_(m.max_position_embeddings, r.Int("max_position_embeddings"));
    ASSIGN_OR_RETURN_(m.layer_norm_eps, r.Float("layer_norm_eps", 1e-12));
    ASSIGN_OR_RETURN_(m.type_vocab_size, r.Int("type_vocab_size", 2));
    const base::json::JsonValue* act = config->Find("hidden_act");
    if (act != nullptr && act->string_value() != "gelu") {
      return absl::InvalidArgumentError(absl::StrCat(config_path, ": bert hidden_act '",
                                                     act->string_value(), "' (supported: gelu)"));
    }
    const base::json::JsonValue* pos = config->Find("position_embedding_type");
    if (pos != nullptr && pos->string_value() != "absolute") {
      return absl::InvalidArgumentError(absl::StrCat(config_path, ": bert position_embedding_type '",
                                                     pos->string_value(), "' (supported: absolute)"));
    }
    m.attention_bias = true;
    tie = true;  // No LM head: an encoder.
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(config_path, ": unsupported model_type '", ShortForMessage(model_type),
                     "' (supported: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, "
                     "qwen3_moe, gemma2, gemma3, gemma3_text, phi3, gpt2, bert)"));
  }
  m.rope_interleaved = false;  // HF keeps the rotate_half layout.

  // Token ids: config.json, falling back to generation_config.json.
  const std::string gen_path = (fs::path(dir) / "generation_config.json").string();
  std::optional<base::json::JsonValue> gen;
  std::error_code ec;
  if (fs::exists(gen_path, ec)) {
    absl::StatusOr<base::json::JsonValue> g = ReadJsonFile(gen_path);
    if (!g.ok()) return g.status();
    gen = std::move(*g);
  }
  auto ids = [&](const char* key) -> absl::StatusOr<std::vector<int64_t>> {
    absl::StatusOr<std::vector<int64_t>> v = r.Ids(*config, key);
    if (!v.ok() || !v->empty() || !gen.has_value()) return v;
    return ConfigReader(*gen, gen_path).Ids(*gen, key);
  };
  std::vector<int64_t> bos, pad;
  ASSIGN_OR_RETURN_(bos, ids("bos_token_id"));
  ASSIGN_OR_RETURN_(m.eos_token_ids, ids("eos_token_id"));
  ASSIGN_OR_RETURN_(pad, ids("pad_token_id"));
  if (!bos.empty()) m.bos_token_id = bos[0];
  if (!m.eos_token_ids.empty()) m.eos_token_id = m.eos_token_ids[0];
  if (!pad.empty()) m.pad_token_id = pad[0];

  absl::StatusOr<std::unique_ptr<SafetensorsShards>> shards = SafetensorsShards::Open(dir);
  if (!shards.ok()) return shards.status();
  for (const auto& [name, t] : (*shards)->tensors()) {
    bool conv1d = false;
    std::string canon = m.architecture == "gpt2"   ? MapGpt2Name(name, &conv1d)
                        : m.architecture == "bert" ? MapBertName(name)
                        : model_type == "gemma2"   ? MapGemma2Name(name)
                        : model_type == "gemma3_text" ? MapGemma2Name(UnnestGemma3Name(name))
                                                      : MapLlamaName(name);
    if (canon.empty() && moe) canon = MapHfMoeName(name);
    if (canon.empty()) continue;
    TensorRef ref{t->type, std::vector<int64_t>(t->shape.rbegin(), t->shape.rend()), t->data,
                  t->nbytes};
    if (ref.ne.size() > 4) {
      return absl::InvalidArgumentError(absl::StrCat(t->name, ": more than 4 dims"));
    }
    if (conv1d) {
      // Stored row-major [in, out]; materialize [out][in] so ne = [in, out].
      if (t->shape.size() != 2) {
        return absl::InvalidArgumentError(absl::StrCat(dir, ": Conv1D tensor '", name, "' is not 2-D"));
      }
      const size_t in = static_cast<size_t>(t->shape[0]), out = static_cast<size_t>(t->shape[1]);
      const size_t es = kernels::cpu::GgmlTypeTraitsOf(t->type).bytes_per_block;
      auto buf = std::make_unique<uint8_t[]>(t->nbytes);
      const uint8_t* src = static_cast<const uint8_t*>(t->data);
      for (size_t i = 0; i < in; ++i) {
        for (size_t j = 0; j < out; ++j) std::memcpy(buf.get() + (j * in + i) * es, src + (i * out + j) * es, es);
      }
      ref.ne = {static_cast<int64_t>(in), static_cast<int64_t>(out)};
      ref.data = buf.get();
      c->owned_.push_back(std::move(buf));
    }
    c->tensors_[canon] = std::move(ref);
  }
  if (m.expert_count > 0) {
    if (absl::Status st = SplitExpertTensors(dir, m.expert_count, &c->tensors_); !st.ok()) {
      return st;
    }
  }
  bool has_output = c->tensors_.count("output") > 0;
  m.tie_word_embeddings = tie.value_or(!has_output);
  if (m.tie_word_embeddings) c->tensors_.erase("output");
  if (c->tensors_.count("blk.0.attn_q.bias") > 0) m.attention_bias = true;
  m.qk_norm = m.qk_norm || model_type == "qwen3" || model_type == "qwen3_moe" ||
              c->tensors_.count("blk.0.attn_q_norm") > 0;
  if (model_type == "phi3") {
    if (absl::Status s = SplitFusedProjections(c.get()); !s.ok()) return s;
  }
  if (absl::Status s = ReadSentenceTransformersPooling(dir, &m); !s.ok()) return s;

  for (const auto& [field, file] :
       {std::pair<std::string*, const char*>{&c->tokenizer_.tokenizer_json, "tokenizer.json"},
        {&c->tokenizer_.tokenizer_config_json, "tokenizer_config.json"},
        {&c->tokenizer_.generation_config_json, "generation_config.json"}}) {
    const std::string p = (fs::path(dir) / file).string();
    if (fs::exists(p, ec)) *field = p;
  }
  c->shards_ = std::move(*shards);
  return c;
}

}  // namespace rill::worker::loader
