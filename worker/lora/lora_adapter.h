// A LoRA adapter in PEFT format (adapter_config.json +
// adapter_model.safetensors), loaded for one base model: per layer and
// targeted projection, the low-rank pair A [rank][in] and B [out][rank] in
// f32 (stored transposed for the apply loops), B pre-multiplied by the scale
// (alpha / rank, or alpha / sqrt(rank) with use_rslora). The base weights are never touched: the
// forward adds B (A x) to each targeted projection's output (lora_apply.h).
//
// Immutable once loaded, so one adapter is shared (shared_ptr<const>) by the
// engine's registry and every in-flight sequence that uses it.
#ifndef RILL_WORKER_LORA_LORA_ADAPTER_H_
#define RILL_WORKER_LORA_LORA_ADAPTER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/loader/checkpoint.h"

namespace rill::worker {

// The projections of a Llama-family layer an adapter may target, under
// their PEFT / Hugging Face module names.
enum class LoraModule { kQ = 0, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kNumLoraModules = 7;
// "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj".
const char* LoraModuleName(LoraModule module);

// One targeted projection of one layer. Empty `a` when not targeted.
struct LoraWeights {
  int64_t in = 0;        // Input features.
  int64_t out = 0;       // Output features.
  std::vector<float> a;  // A transposed: [in][rank] row-major.
  std::vector<float> b;  // B transposed, times the adapter's scale: [rank][out].
  bool empty() const { return a.empty(); }
};

struct LoraAdapter {
  std::string path;
  int rank = 0;
  double alpha = 0.0;
  bool use_rslora = false;
  float scale = 0.0f;                       // Already folded into every b.
  std::vector<std::string> target_modules;  // Canonical names, in LoraModule order.
  // [layer][module].
  std::vector<std::array<LoraWeights, kNumLoraModules>> layers;
  // The base model dimensions it was loaded for (checked per forward).
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_parameters = 0;  // Sum of A and B elements.

  const LoraWeights& weights(int64_t layer, LoraModule m) const {
    return layers[layer][static_cast<int>(m)];
  }
};

struct LoraLoadOptions {
  int max_rank = 64;  // Adapters of a higher rank are refused.
  // Non-empty: every file read must resolve (symlinks included) under this
  // directory, else PermissionDenied (adapters a client names: AddLora).
  std::string root;
  // Larger files are refused (InvalidArgument) before they are read.
  size_t max_config_bytes = size_t{1} << 20;
  size_t max_weights_bytes = size_t{2} << 30;
};

// Loads the PEFT adapter in directory `dir` for a model with `config`.
// Files are read as worker/lora/adapter_file.h says (regular files only,
// under options.root when set, within the size limits).
// NotFound naming the file when adapter_config.json or
// adapter_model.safetensors is missing; Unimplemented for architectures
// other than the Llama family; InvalidArgument naming the problem for a
// malformed config, a rank above options.max_rank, an unknown or
// unsupported target module, options this runtime does not implement
// (fan_in_fan_out, modules_to_save, bias other than "none", DoRA,
// layers_to_transform, rank_pattern / alpha_pattern), a tensor with an
// unexpected name, shape or dtype, a NaN or infinite weight (naming the
// tensor), or a missing A/B half. Never touches the
// base weights. For GGUF "llama" checkpoints (config.rope_interleaved) the
// rows of q/k's B are permuted the way llama.cpp permuted the base q/k rows.
absl::StatusOr<std::shared_ptr<const LoraAdapter>> LoadLoraAdapter(
    const std::string& dir, const worker::loader::ModelConfig& config,
    const LoraLoadOptions& options = {});

}  // namespace rill::worker

#endif  // RILL_WORKER_LORA_LORA_ADAPTER_H_
