#include "worker/models/encoder.h"

#include "absl/strings/str_cat.h"
#include "worker/models/bert.h"

namespace rill::worker {

absl::Status Encoder::Encode(const std::vector<EncoderInput>& batch,
                             std::vector<std::vector<float>>* hidden) {
  const worker::loader::ModelConfig& cfg = config();
  for (size_t s = 0; s < batch.size(); ++s) {
    const EncoderInput& in = batch[s];
    if (in.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, " has no tokens"));
    }
    if (static_cast<int64_t>(in.tokens.size()) > cfg.max_position_embeddings) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": ", in.tokens.size(),
                                                     " tokens exceed the model's maximum of ",
                                                     cfg.max_position_embeddings));
    }
    if (!in.token_types.empty() && in.token_types.size() != in.tokens.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", s, ": token_types and tokens differ in length"));
    }
    for (int32_t t : in.tokens) {
      if (t < 0 || t >= cfg.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": token id ", t,
                                                       " outside the vocabulary of ",
                                                       cfg.vocab_size));
      }
    }
    for (int32_t t : in.token_types) {
      if (t < 0 || t >= cfg.type_vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": token type ", t,
                                                       " outside [0, ", cfg.type_vocab_size, ")"));
      }
    }
  }
  return EncodeValidated(batch, hidden);
}

bool IsEncoderArchitecture(const worker::loader::ModelConfig& config) {
  return config.architecture == "bert";
}

absl::StatusOr<std::unique_ptr<Encoder>> CreateEncoder(
    std::shared_ptr<const worker::loader::Checkpoint> checkpoint, kernels::cpu::ThreadPool* pool,
    const ModelOptions& options) {
  const std::string& arch = checkpoint->config().architecture;
  if (arch == "bert") return CreateBert(std::move(checkpoint), pool, options);
  return absl::UnimplementedError(
      absl::StrCat("'", arch, "' is not an encoder architecture (supported: bert)"));
}

}  // namespace rill::worker
