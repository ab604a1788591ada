// A bidirectional encoder (BERT family) that maps each sequence of a ragged
// batch to its final hidden states. No KV cache: every call sees whole
// sequences. Thread: one caller at a time (Encode uses the model's scratch
// buffers and the shared thread pool).
#ifndef RILL_WORKER_MODELS_ENCODER_H_
#define RILL_WORKER_MODELS_ENCODER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/causal_lm.h"

namespace rill::worker {

struct EncoderInput {
  std::vector<int32_t> tokens;       // Including [CLS] / [SEP].
  std::vector<int32_t> token_types;  // Segment ids; empty means all 0.
};

class Encoder {
 public:
  virtual ~Encoder() = default;

  const worker::loader::ModelConfig& config() const { return checkpoint_->config(); }

  // hidden->at(s): [batch[s].tokens.size()][hidden_size] row-major, the last
  // layer's output. Each sequence's result does not depend on the others in
  // the batch. InvalidArgument (naming the sequence) for an empty sequence,
  // one longer than max_position_embeddings, or an id out of range.
  absl::Status Encode(const std::vector<EncoderInput>& batch,
                      std::vector<std::vector<float>>* hidden);

 protected:
  Encoder(std::shared_ptr<const worker::loader::Checkpoint> checkpoint,
          kernels::cpu::ThreadPool* pool, const ModelOptions& options)
      : checkpoint_(std::move(checkpoint)), pool_(pool), options_(options) {}

  virtual absl::Status EncodeValidated(const std::vector<EncoderInput>& batch,
                                       std::vector<std::vector<float>>* hidden) = 0;

  std::shared_ptr<const worker::loader::Checkpoint> checkpoint_;
  kernels::cpu::ThreadPool* pool_;
  ModelOptions options_;
};

// True when the checkpoint is an encoder architecture ("bert").
bool IsEncoderArchitecture(const worker::loader::ModelConfig& config);

// Builds the encoder for the checkpoint; Unimplemented for a decoder.
// `pool` must outlive the model.
absl::StatusOr<std::unique_ptr<Encoder>> CreateEncoder(
    std::shared_ptr<const worker::loader::Checkpoint> checkpoint, kernels::cpu::ThreadPool* pool,
    const ModelOptions& options = {});

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_ENCODER_H_
