#include "worker/models/flop_count.h"

#include <string>

namespace rill::worker {

std::vector<const worker::loader::TensorRef*> MatMulWeights(
    const worker::loader::Checkpoint& checkpoint) {
  std::vector<const worker::loader::TensorRef*> weights;
  for (const auto& [name, t] : checkpoint.tensors()) {
    if (name.rfind("blk.", 0) == 0 && t.ne.size() == 2 && t.ne[1] > 1) weights.push_back(&t);
  }
  const worker::loader::TensorRef* head = checkpoint.Find("output");
  if (head == nullptr && checkpoint.config().tie_word_embeddings) head = checkpoint.Find("token_embd");
  if (head != nullptr && head->ne.size() == 2) weights.push_back(head);
  return weights;
}

int64_t MatMulMacsPerToken(const worker::loader::Checkpoint& checkpoint) {
  int64_t macs = 0;
  for (const worker::loader::TensorRef* t : MatMulWeights(checkpoint)) macs += t->ne[0] * t->ne[1];
  // A mixture-of-experts token runs expert_used_count of the expert_count
  // experts (blk.N.ffn_*_exps.E) of each MoE layer.
  const worker::loader::ModelConfig& c = checkpoint.config();
  if (c.expert_count > 0) {
    int64_t expert_macs = 0;
    for (const auto& [name, t] : checkpoint.tensors()) {
      if (name.find("_exps.") != std::string::npos) expert_macs += t.ne[0] * t.ne[1];
    }
    macs -= expert_macs - expert_macs / c.expert_count * c.expert_used_count;
  }
  return macs;
}

int64_t AttentionMacsPerToken(const worker::loader::ModelConfig& config, int64_t context) {
  return 2 * config.num_layers * config.num_heads * config.head_dim * context;
}

}  // namespace rill::worker
