#ifndef RILL_WORKER_LOADER_CHECKPOINT_INTERNAL_H_
#define RILL_WORKER_LOADER_CHECKPOINT_INTERNAL_H_

// Private to //worker/loader:checkpoint — the per-format loaders.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/json.h"
#include "worker/loader/checkpoint.h"
#include "worker/loader/gguf.h"

namespace rill::worker::loader {

struct CheckpointBuilder {
  static absl::StatusOr<std::unique_ptr<Checkpoint>> LoadGguf(const std::string& path);
  static absl::StatusOr<std::unique_ptr<Checkpoint>> LoadHf(const std::string& dir);
  // Checks config sanity and the presence/shape of every tensor the
  // architecture needs.
  static absl::Status Validate(const Checkpoint& c);
  // Phi-3 only (GPT-2's attn_qkv stays fused): blk.N.attn_qkv and
  // blk.N.ffn_gate_up become attn_q/k/v and ffn_gate/up, row ranges of the
  // fused tensor (rows are whole quant blocks, so no copy) sized from the
  // config. Errors name the tensor.
  static absl::Status SplitFusedProjections(Checkpoint* c);
  static std::unique_ptr<Checkpoint> New() { return std::unique_ptr<Checkpoint>(new Checkpoint()); }
};

// InvalidArgument naming the tensor when it is absent or its shape (ggml
// order) is not `ne`.
absl::Status ExpectTensorShape(const Checkpoint& c, const std::string& name,
                               const std::vector<int64_t>& ne);

// Mixture of experts (moe_checkpoint.cc).
// The MoE keys of an HF config.json: read for model types mixtral,
// qwen2_moe and qwen3_moe (after the dense keys: intermediate_size and
// num_layers are set), refused by name when set on any other model type.
absl::Status ReadHfMoeConfig(const base::json::JsonValue& config, const std::string& path,
                             const std::string& model_type, ModelConfig* m);
// An HF MoE tensor name -> its canonical name (checkpoint.h), "" for others.
std::string MapHfMoeName(const std::string& hf_name);
// "<arch>.expert_*" metadata (llama = Mixtral, qwen2moe, qwen3moe); refuses
// it on other architectures and keys of other MoE designs.
absl::Status ReadGgufMoeConfig(const GgufFile& f, const std::string& arch,
                               const std::string& path, ModelConfig* m);
// Replaces each 3-D blk.N.ffn_{gate,up,down}_exps tensor by its experts'
// 2-D views (blk.N.ffn_gate_exps.E), splits transformers 5's fused
// blk.N.ffn_gate_up_exps into gate and up views, and renames llama.cpp's
// early per-expert names (blk.N.ffn_gate.E) the same way.
absl::Status SplitExpertTensors(const std::string& path, int64_t expert_count,
                                std::map<std::string, TensorRef>* tensors);
// The router's, the experts' and the shared expert's presence and shapes.
absl::Status ValidateMoeLayer(const Checkpoint& c, int64_t layer);

}  // namespace rill::worker::loader

#endif  // RILL_WORKER_LOADER_CHECKPOINT_INTERNAL_H_
