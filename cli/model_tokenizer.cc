#include "cli/model_tokenizer.h"

#include <utility>

#include "engine/model_path.h"
#include "engine/tokenizer_loader.h"
#include "worker/loader/checkpoint.h"

namespace rill::cli {

absl::StatusOr<ModelTokenizer> LoadModelTokenizer(const std::string& model) {
  ModelTokenizer out;
  out.path = engine::ResolveModelPath(model);
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> checkpoint =
      worker::loader::LoadCheckpoint(out.path);
  if (!checkpoint.ok()) return checkpoint.status();
  absl::StatusOr<tokenizer::TokenizerSpec> spec =
      engine::TokenizerSpecFromCheckpoint(**checkpoint);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> tok = tokenizer::Tokenizer::FromSpec(*spec);
  if (!tok.ok()) return tok.status();
  out.tokenizer = std::move(*tok);
  out.context_length = (*checkpoint)->config().max_position_embeddings;
  return out;
}

}  // namespace rill::cli
