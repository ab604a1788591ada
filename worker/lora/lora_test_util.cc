#include "worker/lora/lora_test_util.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/quant_types.h"
#include "worker/loader/checkpoint.h"
#include "worker/loader/gguf.h"
#include "worker/loader/gguf_writer.h"
#include "worker/loader/safetensors_writer.h"

namespace rill::worker::testing {
namespace {

std::vector<float> Normal(int64_t n, double stddev, std::mt19937* rng, double mean = 0.0) {
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(*rng);
  return v;
}

void Add(Weights* w, const std::string& name, std::vector<int64_t> shape, double stddev,
         std::mt19937* rng, double mean = 0.0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  (*w)[name] = Tensor{std::move(shape), Normal(n, stddev, rng, mean)};
}

struct Proj {
  const char* module;
  const char* block;  // self_attn or mlp
  const char* gguf;
};
constexpr Proj kProjs[] = {
    {"q_proj", "self_attn", "attn_q"}, {"k_proj", "self_attn", "attn_k"},
    {"v_proj", "self_attn", "attn_v"}, {"o_proj", "self_attn", "attn_output"},
    {"gate_proj", "mlp", "ffn_gate"},  {"up_proj", "mlp", "ffn_up"},
    {"down_proj", "mlp", "ffn_down"}};

// [in, out] of a projection.
std::pair<int64_t, int64_t> Dims(const TinySpec& s, const std::string& module) {
  const int64_t qd = s.heads * s.head_dim, kvd = s.kv_heads * s.head_dim;
  if (module == "q_proj") return {s.hidden, qd};
  if (module == "k_proj" || module == "v_proj") return {s.hidden, kvd};
  if (module == "o_proj") return {qd, s.hidden};
  if (module == "down_proj") return {s.ffn, s.hidden};
  return {s.hidden, s.ffn};
}

const char* BlockOf(const std::string& module) {
  for (const Proj& p : kProjs) {
    if (module == p.module) return p.block;
  }
  return "mlp";
}

// llama.cpp's convert permute: rows (head, half, i) -> (head, i, half).
std::vector<float> PermuteQk(const std::vector<float>& w, int64_t heads, int64_t head_dim,
                             int64_t cols) {
  std::vector<float> out(w.size());
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t i = 0; i < half; ++i) {
        const int64_t src = h * head_dim + s * half + i, dst = h * head_dim + 2 * i + s;
        for (int64_t c = 0; c < cols; ++c) out[dst * cols + c] = w[src * cols + c];
      }
    }
  }
  return out;
}

}  // namespace

TinySpec SpecOfModel(const loader::ModelConfig& c) {
  TinySpec s;
  s.hidden = c.hidden_size;
  s.heads = c.num_heads;
  s.kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  s.ffn = c.intermediate_size;
  s.layers = c.num_layers;
  s.vocab = c.vocab_size;
  return s;
}

TinySpec DefaultArchitectureSpec(int64_t layers, int64_t vocab) {
  TinySpec s;
  s.hidden = 576;
  s.heads = 9;
  s.kv_heads = 3;
  s.head_dim = 64;
  s.ffn = 1536;
  s.layers = layers;
  s.vocab = vocab;
  return s;
}

Weights RandomModel(const TinySpec& s, std::mt19937* rng) {
  Weights w;
  Add(&w, "model.embed_tokens.weight", {s.vocab, s.hidden}, 1.0, rng);
  Add(&w, "model.norm.weight", {s.hidden}, 0.1, rng, 1.0);
  Add(&w, "lm_head.weight", {s.vocab, s.hidden}, 1.0 / std::sqrt(double(s.hidden)), rng);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    Add(&w, p + "input_layernorm.weight", {s.hidden}, 0.1, rng, 1.0);
    Add(&w, p + "post_attention_layernorm.weight", {s.hidden}, 0.1, rng, 1.0);
    for (const Proj& pr : kProjs) {
      auto [in, out] = Dims(s, pr.module);
      Add(&w, absl::StrCat(p, pr.block, ".", pr.module, ".weight"), {out, in},
          1.0 / std::sqrt(double(in)), rng);
    }
    if (s.arch == "qwen2") {
      for (const char* m : {"q_proj", "k_proj", "v_proj"}) {
        Add(&w, absl::StrCat(p, "self_attn.", m, ".bias"), {Dims(s, m).second}, 0.1, rng);
      }
    }
  }
  return w;
}

absl::Status WriteGgufModel(const std::string& path, const TinySpec& s, const Weights& w) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  worker::loader::GgufWriter g;
  const std::string a = s.arch + ".";
  g.AddString("general.architecture", s.arch);
  g.AddUint32(a + "embedding_length", s.hidden);
  g.AddUint32(a + "block_count", s.layers);
  g.AddUint32(a + "attention.head_count", s.heads);
  g.AddUint32(a + "attention.head_count_kv", s.kv_heads);
  g.AddUint32(a + "attention.key_length", s.head_dim);
  g.AddUint32(a + "feed_forward_length", s.ffn);
  g.AddUint32(a + "context_length", s.context);
  g.AddUint32(a + "vocab_size", s.vocab);
  g.AddFloat32(a + "rope.freq_base", 10000.0f);
  g.AddFloat32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  g.AddUint32("tokenizer.ggml.eos_token_id", 0);
  // GGUF lists dimensions innermost first: HF [out][in] is ne {in, out}.
  auto put = [&](const std::string& gguf, const std::string& hf, bool permute, int64_t heads) {
    const Tensor& t = w.at(hf);
    std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());
    std::vector<float> v = t.values;
    if (permute) v = PermuteQk(v, heads, s.head_dim, t.shape.size() == 2 ? t.shape[1] : 1);
    g.AddF32Tensor(gguf, ne, v);
  };
  const bool permute = s.arch == "llama";
  put("token_embd.weight", "model.embed_tokens.weight", false, 0);
  put("output_norm.weight", "model.norm.weight", false, 0);
  put("output.weight", "lm_head.weight", false, 0);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    const std::string b = absl::StrCat("blk.", l, ".");
    put(b + "attn_norm.weight", p + "input_layernorm.weight", false, 0);
    put(b + "ffn_norm.weight", p + "post_attention_layernorm.weight", false, 0);
    for (const Proj& pr : kProjs) {
      const std::string m = pr.module;
      const bool qk = m == "q_proj" || m == "k_proj";
      put(b + pr.gguf + ".weight", absl::StrCat(p, pr.block, ".", m, ".weight"), permute && qk,
          m == "q_proj" ? s.heads : s.kv_heads);
      const std::string bias = absl::StrCat(p, pr.block, ".", m, ".bias");
      if (w.count(bias)) put(b + pr.gguf + ".bias", bias, false, 0);
    }
  }
  return g.WriteFile(path);
}

Weights RandomAdapter(const TinySpec& s, const AdapterSpec& a, std::mt19937* rng) {
  Weights w;
  for (int64_t l = 0; l < s.layers; ++l) {
    for (const std::string& m : a.targets) {
      auto [in, out] = Dims(s, m);
      const std::string p =
          absl::StrCat("base_model.model.model.layers.", l, ".", BlockOf(m), ".", m, ".");
      Add(&w, p + "lora_A.weight", {a.rank, in}, 1.0 / std::sqrt(double(in)), rng);
      Add(&w, p + "lora_B.weight", {out, a.rank}, 0.3 / std::sqrt(double(a.rank)), rng);
    }
  }
  return w;
}

double AdapterScale(const AdapterSpec& a) {
  return a.use_rslora ? a.alpha / std::sqrt(double(a.rank)) : a.alpha / a.rank;
}

std::string AdapterConfigJson(const AdapterSpec& a) {
  std::vector<std::string> quoted;
  for (const std::string& t : a.targets) quoted.push_back(absl::StrCat("\"", t, "\""));
  return absl::StrCat("{\"peft_type\": \"LORA\", \"r\": ", a.rank, ", \"lora_alpha\": ", a.alpha,
                      ", \"use_rslora\": ", a.use_rslora ? "true" : "false",
                      ", \"target_modules\": [", absl::StrJoin(quoted, ", "),
                      "], \"fan_in_fan_out\": false, \"bias\": \"none\", "
                      "\"modules_to_save\": null, \"task_type\": \"CAUSAL_LM\"}");
}

absl::Status WriteAdapter(const std::string& dir, const AdapterSpec& a, const Weights& tensors,
                          const std::string& config_json) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", dir, ": ", ec.message()));
  std::ofstream(dir + "/adapter_config.json")
      << (config_json.empty() ? AdapterConfigJson(a) : config_json);
  worker::loader::SafetensorsWriter st;
  for (const auto& [name, t] : tensors) st.AddF32Tensor(name, t.shape, t.values);
  return st.WriteFile(dir + "/adapter_model.safetensors");
}

Weights Merge(const Weights& model, const AdapterSpec& a, const Weights& adapter) {
  Weights merged = model;
  const double scale = AdapterScale(a);
  const std::string prefix = "base_model.model.";
  for (const auto& [name, ta] : adapter) {
    const std::string suffix = ".lora_A.weight";
    if (name.size() < suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string stem = name.substr(0, name.size() - suffix.size());
    const Tensor& tb = adapter.at(stem + ".lora_B.weight");
    Tensor& w = merged.at(stem.substr(prefix.size()) + ".weight");
    const int64_t r = ta.shape[0], in = ta.shape[1], out = tb.shape[0];
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t k = 0; k < in; ++k) {
        double acc = 0;
        for (int64_t j = 0; j < r; ++j) acc += double(tb.values[o * r + j]) * ta.values[j * in + k];
        w.values[o * in + k] += static_cast<float>(scale * acc);
      }
    }
  }
  return merged;
}

absl::Status WriteMergedGguf(const std::string& src, const std::string& dst, const AdapterSpec& a,
                             const Weights& adapter) {
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
      worker::loader::LoadCheckpoint(src);
  if (!ckpt.ok()) return ckpt.status();
  const worker::loader::ModelConfig& c = (*ckpt)->config();
  if (c.architecture != "llama" || !c.rope_interleaved) {
    return absl::InvalidArgumentError("WriteMergedGguf: GGUF llama models only");
  }
  absl::StatusOr<std::unique_ptr<worker::loader::GgufFile>> file =
      worker::loader::GgufFile::Open(src);
  if (!file.ok()) return file.status();
  worker::loader::GgufWriter g;
  g.AddString("general.architecture", "llama");
  g.AddUint32("llama.embedding_length", c.hidden_size);
  g.AddUint32("llama.block_count", c.num_layers);
  g.AddUint32("llama.attention.head_count", c.num_heads);
  g.AddUint32("llama.attention.head_count_kv", c.num_kv_heads);
  g.AddUint32("llama.attention.key_length", c.head_dim);
  g.AddUint32("llama.feed_forward_length", c.intermediate_size);
  g.AddUint32("llama.context_length", c.max_position_embeddings);
  g.AddUint32("llama.vocab_size", c.vocab_size);
  g.AddFloat32("llama.rope.freq_base", c.rope_theta);
  g.AddFloat32("llama.attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  if (c.rope_scaling.type != worker::loader::RopeScaling::Type::kNone) {
    return absl::UnimplementedError("WriteMergedGguf: rope scaling is not copied");
  }
  const double scale = AdapterScale(a);
  for (const worker::loader::GgufTensorInfo& t : (*file)->tensors()) {
    const std::string name(t.name);
    const Proj* proj = nullptr;
    int64_t layer = -1;
    for (const Proj& p : kProjs) {
      const std::string suffix = std::string(".") + p.gguf + ".weight";
      if (name.rfind("blk.", 0) == 0 && name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        proj = &p;
        layer = std::stoll(name.substr(4, name.size() - suffix.size() - 4));
      }
    }
    const std::string stem = proj ? absl::StrCat("base_model.model.model.layers.", layer, ".",
                                                 proj->block, ".", proj->module)
                                  : "";
    if (proj == nullptr || !adapter.count(stem + ".lora_A.weight")) {
      g.AddTensor(name, t.type, t.ne, std::string(static_cast<const char*>(t.data), t.nbytes));
      continue;
    }
    const int64_t in = t.ne[0], out = t.ne[1];
    if (!kernels::cpu::CanDequantize(t.type)) {
      return absl::UnimplementedError(absl::StrCat(name, ": type ",
                                                   std::string(kernels::cpu::GgmlTypeName(t.type)),
                                                   " does not dequantize"));
    }
    std::vector<float> w(in * out);
    const size_t row_bytes = t.nbytes / out;
    for (int64_t r = 0; r < out; ++r) {
      kernels::cpu::DequantizeRow(t.type, static_cast<const char*>(t.data) + r * row_bytes,
                                  &w[r * in], in);
    }
    const Tensor& ta = adapter.at(stem + ".lora_A.weight");
    const Tensor& tb = adapter.at(stem + ".lora_B.weight");
    const int64_t rank = ta.shape[0];
    std::vector<float> delta(in * out);  // HF row order.
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t k = 0; k < in; ++k) {
        double acc = 0;
        for (int64_t j = 0; j < rank; ++j)
          acc += double(tb.values[o * rank + j]) * ta.values[j * in + k];
        delta[o * in + k] = static_cast<float>(scale * acc);
      }
    }
    const std::string m = proj->module;
    if (m == "q_proj") delta = PermuteQk(delta, c.num_heads, c.head_dim, in);
    if (m == "k_proj") delta = PermuteQk(delta, c.num_kv_heads, c.head_dim, in);
    for (size_t i = 0; i < w.size(); ++i) w[i] += delta[i];
    g.AddF32Tensor(name, t.ne, w);
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(dst).parent_path(), ec);
  return g.WriteFile(dst);
}

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

}  // namespace rill::worker::testing
