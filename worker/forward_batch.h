// One step of work for a worker: a ragged batch where every sequence brings
// a chunk of new tokens (a prefill chunk, or one decode token) and the block
// table that maps its positions to KV-cache blocks. This is the interface the
// engine drives each step; the offline CLI uses it too.
#ifndef RILL_WORKER_FORWARD_BATCH_H_
#define RILL_WORKER_FORWARD_BATCH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "worker/sampling_spec.h"

namespace rill::worker {

struct LoraAdapter;  // worker/lora/lora_adapter.h

struct SequenceChunk {
  // New tokens, at positions start_pos .. start_pos + tokens.size() - 1.
  std::vector<int32_t> tokens;
  // Tokens of this sequence already in the KV cache (its context before this chunk).
  int32_t start_pos = 0;
  // Cache block ids for positions [0, start_pos + tokens.size()): position p
  // lives in block block_table[p / block_size], slot p % block_size.
  std::vector<int32_t> block_table;
  // Logits for every new token (prompt logprobs, tests) instead of the last only.
  bool all_logits = false;
  // Also return the final hidden states (after the final norm) of every new
  // token, for pooling (embeddings). Encoders return only these.
  bool return_hidden = false;
  // The LoRA adapter this sequence runs with (null: the base model). Each
  // sequence of a batch may have its own; the base weights are shared.
  std::shared_ptr<const LoraAdapter> lora;
  // Set only for executors that sample on their device, on a sequence whose
  // last token's next token is to be sampled (never with all_logits): the
  // executor samples it and returns ForwardOutput::sampled instead of its
  // logits row.
  std::optional<DeviceSampling> device_sampling;
};

struct ForwardBatch {
  std::vector<SequenceChunk> sequences;
};

struct ForwardOutput {
  // Per sequence: [n][vocab] row-major, n = tokens.size() if all_logits else 1;
  // empty for a sequence sampled on the device.
  std::vector<std::vector<float>> logits;
  // Per sequence: [tokens.size()][hidden_size] row-major when return_hidden,
  // else empty.
  std::vector<std::vector<float>> hidden;
  // Per sequence when any has device_sampling (else empty): its sampled
  // token, or token -1 where the sequence had none (its logits are above).
  std::vector<DeviceSampledToken> sampled;
};

}  // namespace rill::worker

#endif  // RILL_WORKER_FORWARD_BATCH_H_
