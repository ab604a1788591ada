#include "worker/lora/lora_adapter.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/quant_types.h"
#include "base/json.h"
#include "worker/loader/safetensors.h"
#include "worker/lora/adapter_file.h"

namespace rill::worker {
namespace {

namespace fs = std::filesystem;

constexpr const char* kModuleNames[kNumLoraModules] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                       "gate_proj", "up_proj", "down_proj"};

int ModuleIndex(std::string_view name) {
  for (int i = 0; i < kNumLoraModules; ++i) {
    if (name == kModuleNames[i]) return i;
  }
  return -1;
}

std::string SupportedModules() {
  return absl::StrJoin(std::vector<std::string>(kModuleNames, kModuleNames + kNumLoraModules),
                       ", ");
}

struct Dims {
  int64_t in, out;
};

// [in, out] of each projection of the base model.
Dims ModuleDims(const worker::loader::ModelConfig& c, int module) {
  const int64_t h = c.hidden_size, qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim,
                f = c.intermediate_size;
  switch (static_cast<LoraModule>(module)) {
    case LoraModule::kQ:
      return {h, qd};
    case LoraModule::kK:
    case LoraModule::kV:
      return {h, kvd};
    case LoraModule::kO:
      return {qd, h};
    case LoraModule::kGate:
    case LoraModule::kUp:
      return {h, f};
    case LoraModule::kDown:
      return {f, h};
  }
  return {0, 0};
}

struct AdapterConfig {
  int rank = 0;
  double alpha = 8.0;  // PEFT's default lora_alpha.
  bool use_rslora = false;
  std::vector<bool> targets = std::vector<bool>(kNumLoraModules, false);
};

// A config option this runtime does not implement, when set to anything
// but its neutral value.
absl::Status Refuse(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": ", what, " is not supported by this server's LoRA runtime"));
}

bool IsEmptyOrNull(const base::json::JsonValue* v) {
  if (v == nullptr || v->is_null()) return true;
  if (v->is_array()) return v->array_items().empty();
  if (v->is_object()) return v->object_members().empty();
  return false;
}

absl::StatusOr<AdapterConfig> ParseConfig(const std::string& path,
                                          const LoraLoadOptions& options) {
  const int max_rank = options.max_rank;
  absl::StatusOr<std::string> text = ReadAdapterFile(path, options.root, options.max_config_bytes);
  if (!text.ok()) return text.status();
  absl::StatusOr<base::json::JsonValue> json = base::json::ParseJson(*text);
  if (!json.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", json.status().message()));
  }
  if (!json->is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not an object"));
  AdapterConfig c;
  if (const base::json::JsonValue* t = json->Find("peft_type");
      t != nullptr && t->is_string() && t->string_value() != "LORA") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": peft_type is '", t->string_value(), "', expected 'LORA'"));
  }
  const base::json::JsonValue* r = json->Find("r");
  std::optional<int64_t> rank = r ? r->AsInt64() : std::nullopt;
  if (!rank.has_value() || *rank <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": \"r\" must be a positive integer"));
  }
  if (*rank > max_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": rank ", *rank, " exceeds max_lora_rank ", max_rank));
  }
  c.rank = static_cast<int>(*rank);
  if (const base::json::JsonValue* a = json->Find("lora_alpha"); a != nullptr && !a->is_null()) {
    if (!a->is_number() || !std::isfinite(a->number_value())) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": \"lora_alpha\" must be a finite number"));
    }
    c.alpha = a->number_value();
  }
  if (const base::json::JsonValue* v = json->Find("use_rslora"); v != nullptr) {
    c.use_rslora = v->bool_value();
  }
  if (const base::json::JsonValue* v = json->Find("fan_in_fan_out");
      v != nullptr && v->bool_value()) {
    return Refuse(path, "fan_in_fan_out=true (Conv1D-style weights)");
  }
  if (const base::json::JsonValue* v = json->Find("use_dora"); v != nullptr && v->bool_value()) {
    return Refuse(path, "use_dora=true (DoRA)");
  }
  if (const base::json::JsonValue* v = json->Find("bias");
      v != nullptr && v->is_string() && v->string_value() != "none") {
    return Refuse(path, absl::StrCat("bias=\"", v->string_value(), "\""));
  }
  for (const char* key :
       {"modules_to_save", "layers_to_transform", "rank_pattern", "alpha_pattern"}) {
    if (!IsEmptyOrNull(json->Find(key))) return Refuse(path, key);
  }
  const base::json::JsonValue* targets = json->Find("target_modules");
  std::vector<std::string> names;
  if (targets != nullptr && targets->is_string()) {
    // PEFT reads a string as a regular expression; only the plain names and
    // "all-linear" are understood here.
    if (targets->string_value() == "all-linear") {
      for (int i = 0; i < kNumLoraModules; ++i) names.push_back(kModuleNames[i]);
    } else {
      names.push_back(targets->string_value());
    }
  } else if (targets != nullptr && targets->is_array()) {
    for (const base::json::JsonValue& t : targets->array_items()) {
      if (!t.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": target_modules must be a list of strings"));
      }
      names.push_back(t.string_value());
    }
  }
  if (names.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": target_modules is missing or empty"));
  }
  for (const std::string& n : names) {
    const int m = ModuleIndex(n);
    if (m < 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": unknown target module '", n,
                                                     "' (supported: ", SupportedModules(), ")"));
    }
    c.targets[m] = true;
  }
  return c;
}

// Parsed "base_model.model.model.layers.{i}.{self_attn|mlp}.{module}.lora_{A|B}.weight".
struct TensorKey {
  int64_t layer = -1;
  int module = -1;
  bool is_a = false;
};

bool ParseTensorKey(std::string_view name, int64_t num_layers, TensorKey* key) {
  std::vector<std::string> p = absl::StrSplit(std::string(name), '.');
  if (p.size() != 9 || p[0] != "base_model" || p[1] != "model" || p[2] != "model" ||
      p[3] != "layers" || p[8] != "weight") {
    return false;
  }
  if (!absl::SimpleAtoi(p[4], &key->layer) || key->layer < 0 || key->layer >= num_layers) {
    return false;
  }
  key->module = ModuleIndex(p[6]);
  if (key->module < 0) return false;
  const bool attn = key->module <= static_cast<int>(LoraModule::kO);
  if (p[5] != (attn ? "self_attn" : "mlp")) return false;
  if (p[7] != "lora_A" && p[7] != "lora_B") return false;
  key->is_a = p[7] == "lora_A";
  return true;
}

std::string ShapeString(const std::vector<int64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

// llama.cpp stores q/k rows of GGUF "llama" models permuted so rotary pairs
// are adjacent: GGUF row (head, i, half) is HF row (head, half, i). B's rows
// are output features, so they get the same permutation.
std::vector<float> PermuteRowsForInterleavedRope(const std::vector<float>& b, int64_t num_heads,
                                                 int64_t head_dim, int64_t rank) {
  std::vector<float> out(b.size());
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t s = 0; s < 2; ++s) {
        const int64_t gguf_row = h * head_dim + 2 * i + s;
        const int64_t hf_row = h * head_dim + s * half + i;
        std::copy(b.begin() + hf_row * rank, b.begin() + (hf_row + 1) * rank,
                  out.begin() + gguf_row * rank);
      }
    }
  }
  return out;
}

// [rows][cols] -> [cols][rows].
std::vector<float> Transpose(const std::vector<float>& m, int64_t rows, int64_t cols) {
  std::vector<float> t(m.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = m[i * cols + j];
  }
  return t;
}

}  // namespace

const char* LoraModuleName(LoraModule module) { return kModuleNames[static_cast<int>(module)]; }

absl::StatusOr<std::shared_ptr<const LoraAdapter>> LoadLoraAdapter(
    const std::string& dir, const worker::loader::ModelConfig& config,
    const LoraLoadOptions& options) {
  if (config.architecture != "llama") {
    return absl::UnimplementedError(
        absl::StrCat("LoRA adapters are supported for the Llama "
                     "family only, not architecture '",
                     config.architecture, "'"));
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("LoRA adapter directory ", dir, " does not exist"));
  }
  const std::string config_path = (fs::path(dir) / "adapter_config.json").string();
  absl::StatusOr<AdapterConfig> cfg = ParseConfig(config_path, options);
  if (!cfg.ok()) return cfg.status();
  const std::string weights_path = (fs::path(dir) / "adapter_model.safetensors").string();
  if (!fs::exists(fs::symlink_status(weights_path, ec))) {
    return absl::NotFoundError(absl::StrCat(
        "LoRA adapter file ", weights_path,
        " does not exist (only the safetensors format is read, not adapter_model.bin)"));
  }
  absl::StatusOr<std::string> bytes =
      ReadAdapterFile(weights_path, options.root, options.max_weights_bytes);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::unique_ptr<worker::loader::SafetensorsFile>> file =
      worker::loader::SafetensorsFile::Parse(reinterpret_cast<const uint8_t*>(bytes->data()),
                                             bytes->size(), weights_path);
  if (!file.ok()) return file.status();

  auto adapter = std::make_shared<LoraAdapter>();
  LoraAdapter& a = *adapter;
  a.path = dir;
  a.rank = cfg->rank;
  a.alpha = cfg->alpha;
  a.use_rslora = cfg->use_rslora;
  a.scale = static_cast<float>(cfg->use_rslora ? cfg->alpha / std::sqrt(double(cfg->rank))
                                               : cfg->alpha / cfg->rank);
  for (int m = 0; m < kNumLoraModules; ++m) {
    if (cfg->targets[m]) a.target_modules.push_back(kModuleNames[m]);
  }
  a.hidden_size = config.hidden_size;
  a.num_layers = config.num_layers;
  a.layers.resize(config.num_layers);
  std::vector<bool> module_seen(kNumLoraModules, false);
  const int64_t r = a.rank;
  for (const worker::loader::SafetensorsTensor& t : (*file)->tensors()) {
    TensorKey key;
    if (!ParseTensorKey(t.name, config.num_layers, &key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          weights_path, ": unexpected tensor '", t.name,
          "' (expected base_model.model.model.layers.<i>.<self_attn|mlp>.<module>.lora_<A|B>"
          ".weight with i < ",
          config.num_layers, " and module one of ", SupportedModules(), ")"));
    }
    if (!cfg->targets[key.module]) {
      return absl::InvalidArgumentError(absl::StrCat(weights_path, ": tensor '", t.name,
                                                     "' is for module ", kModuleNames[key.module],
                                                     ", which target_modules does not list"));
    }
    const Dims d = ModuleDims(config, key.module);
    const std::vector<int64_t> want =
        key.is_a ? std::vector<int64_t>{r, d.in} : std::vector<int64_t>{d.out, r};
    if (t.shape != want) {
      return absl::InvalidArgumentError(
          absl::StrCat(weights_path, ": tensor '", t.name, "' has shape ", ShapeString(t.shape),
                       ", expected ", ShapeString(want), " (rank ", r, ")"));
    }
    if (!kernels::cpu::CanDequantize(t.type)) {
      return absl::UnimplementedError(absl::StrCat(
          weights_path, ": tensor '", t.name, "' has type ",
          std::string(kernels::cpu::GgmlTypeName(t.type)), ", which the CPU kernels do not run"));
    }
    std::vector<float> values(want[0] * want[1]);
    kernels::cpu::DequantizeRow(t.type, t.data, values.data(), values.size());
    // One NaN/Inf would poison every logit of every sequence using it.
    if (!std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); })) {
      return absl::InvalidArgumentError(absl::StrCat(weights_path, ": tensor '", t.name,
                                                     "' has a NaN or infinite value"));
    }
    LoraWeights& w = a.layers[key.layer][key.module];
    w.in = d.in;
    w.out = d.out;
    std::vector<float>& dst = key.is_a ? w.a : w.b;
    if (!dst.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(weights_path, ": tensor '", t.name, "' appears twice"));
    }
    dst = std::move(values);
    module_seen[key.module] = true;
  }
  for (int64_t l = 0; l < config.num_layers; ++l) {
    for (int m = 0; m < kNumLoraModules; ++m) {
      LoraWeights& w = a.layers[l][m];
      if (w.a.empty() != w.b.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(weights_path, ": layer ", l, " ", kModuleNames[m], " has lora_",
                         w.a.empty() ? "B" : "A", " but no lora_", w.a.empty() ? "A" : "B"));
      }
      if (w.empty()) continue;
      for (float& x : w.b) x *= a.scale;
      if (!std::all_of(w.b.begin(), w.b.end(), [](float v) { return std::isfinite(v); })) {
        return absl::InvalidArgumentError(
            absl::StrCat(weights_path, ": layer ", l, " ", kModuleNames[m],
                         " lora_B overflows to infinity when scaled by lora_alpha / r = ",
                         a.scale));
      }
      const bool permute = config.rope_interleaved && (m == static_cast<int>(LoraModule::kQ) ||
                                                       m == static_cast<int>(LoraModule::kK));
      if (permute) {
        const int64_t heads =
            m == static_cast<int>(LoraModule::kQ) ? config.num_heads : config.num_kv_heads;
        w.b = PermuteRowsForInterleavedRope(w.b, heads, config.head_dim, r);
      }
      w.a = Transpose(w.a, r, w.in);
      w.b = Transpose(w.b, w.out, r);
      a.num_parameters += static_cast<int64_t>(w.a.size() + w.b.size());
    }
  }
  for (int m = 0; m < kNumLoraModules; ++m) {
    if (cfg->targets[m] && !module_seen[m]) {
      return absl::InvalidArgumentError(
          absl::StrCat(weights_path, ": target module ", kModuleNames[m], " has no weights"));
    }
  }
  return std::shared_ptr<const LoraAdapter>(std::move(adapter));
}

}  // namespace rill::worker
