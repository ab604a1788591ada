// Parameters and result of an embedding request (AsyncLLMEngine::Encode),
// vLLM's PoolingParams shape.
#ifndef RILL_ENGINE_POOLING_PARAMS_H_
#define RILL_ENGINE_POOLING_PARAMS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::engine {

enum class PoolingType {
  kDefault,  // The model's own (its GGUF pooling_type or sentence-transformers Pooling
             // module), else MEAN for encoders and LAST for decoders.
  kMean,     // Average of every prompt token's final hidden state.
  kCls,      // The first token's ([CLS] on BERT). Allowed on decoders too: the
             // first prompt token's state, which has seen only itself.
  kLast,     // The last prompt token's (the usual choice for decoder embedders).
};

struct PoolingParams {
  PoolingType type = PoolingType::kDefault;
  bool normalize = true;   // L2-normalize.
  int32_t dimensions = 0;  // > 0: keep the first N features (Matryoshka), before normalizing.
};

struct EmbeddingOutput {
  std::string request_id;
  std::vector<float> embedding;
  int64_t num_prompt_tokens = 0;
};

// Called once, on the engine loop thread, with the embedding or the error.
using EmbeddingCallback = std::function<void(absl::StatusOr<EmbeddingOutput>)>;

}  // namespace rill::engine

#endif  // RILL_ENGINE_POOLING_PARAMS_H_
