// The tokenizer of a --model without its weights: what `rill tokenize` and
// `rill detokenize` need, and what `rill generate` needs before it sizes its
// engine for the prompt.
#ifndef RILL_CLI_MODEL_TOKENIZER_H_
#define RILL_CLI_MODEL_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tokenizer/tokenizer.h"

namespace rill::cli {

struct ModelTokenizer {
  std::string path;  // The resolved model path (see engine::ResolveModelPath).
  // The frontend's tokenizer facade: encoding and the chat template.
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  int64_t context_length = 0;  // The model's max_position_embeddings (> 0).
};

// `model`: "default", a .gguf file or a Hugging Face directory. Reads the
// checkpoint's metadata and tokenizer only; the weights stay unread.
absl::StatusOr<ModelTokenizer> LoadModelTokenizer(const std::string& model);

}  // namespace rill::cli

#endif  // RILL_CLI_MODEL_TOKENIZER_H_
