// Test-only: tiny random Llama-family models and PEFT adapters written to
// disk, and the offline merge W' = W + scale * B A that the LoRA tests
// compare against. Weights are kept in Hugging Face layout ([out][in]
// row-major, HF q/k row order); WriteGgufModel applies llama.cpp's q/k row
// permutation itself for the "llama" architecture, independently of the
// adapter loader's.
#ifndef RILL_WORKER_LORA_LORA_TEST_UTIL_H_
#define RILL_WORKER_LORA_LORA_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/loader/checkpoint.h"

namespace rill::worker::testing {

struct TinySpec {
  std::string arch = "llama";  // GGUF architecture: "llama" (permuted q/k) or "qwen2" (biases).
  int64_t hidden = 32, heads = 4, kv_heads = 2, head_dim = 8, ffn = 48, layers = 2, vocab = 96;
  int64_t context = 256;
};

// The dimensions of a loaded model (the default model, say), so adapters
// can be made for it.
TinySpec SpecOfModel(const loader::ModelConfig& c);

// SmolLM2-135M's per-layer dimensions (hidden 576, 9 heads / 3 K/V heads of
// 64, MLP 1536) with `layers` layers and a small vocabulary.
TinySpec DefaultArchitectureSpec(int64_t layers = 2, int64_t vocab = 2048);

struct Tensor {
  std::vector<int64_t> shape;  // Row-major, outermost first (HF / safetensors order).
  std::vector<float> values;
};
// HF names: model.embed_tokens.weight, model.layers.{i}.self_attn.q_proj.weight, ...
using Weights = std::map<std::string, Tensor>;

Weights RandomModel(const TinySpec& spec, std::mt19937* rng);
// An f32 GGUF file of the model (what LoadCheckpoint reads).
absl::Status WriteGgufModel(const std::string& path, const TinySpec& spec, const Weights& w);

struct AdapterSpec {
  int rank = 4;
  double alpha = 8.0;
  bool use_rslora = false;
  std::vector<std::string> targets = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                      "gate_proj", "up_proj", "down_proj"};
};
// PEFT names: base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight ...
Weights RandomAdapter(const TinySpec& spec, const AdapterSpec& a, std::mt19937* rng);
double AdapterScale(const AdapterSpec& a);
// adapter_config.json (from `config_json`, or built from `a` when empty) and
// adapter_model.safetensors in `dir` (created).
absl::Status WriteAdapter(const std::string& dir, const AdapterSpec& a, const Weights& tensors,
                          const std::string& config_json = "");
std::string AdapterConfigJson(const AdapterSpec& a);
// W + scale * B A for every adapted projection, in HF layout.
Weights Merge(const Weights& model, const AdapterSpec& a, const Weights& adapter);

// Copies the GGUF "llama" model at `src` to `dst` with every projection the
// adapter targets replaced by f32 W + scale * B A (W dequantized; the delta's
// q/k rows permuted as llama.cpp permuted W's). Other tensors keep their
// bytes and type.
absl::Status WriteMergedGguf(const std::string& src, const std::string& dst, const AdapterSpec& a,
                             const Weights& adapter);

std::string TempDir();

}  // namespace rill::worker::testing

#endif  // RILL_WORKER_LORA_LORA_TEST_UTIL_H_
