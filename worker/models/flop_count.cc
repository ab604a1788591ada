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
  return macs;
}

int64_t AttentionMacsPerToken(const worker::loader::ModelConfig& config, int64_t context) {
  return 2 * config.num_layers * config.num_heads * config.head_dim * context;
}

}  // namespace rill::worker
