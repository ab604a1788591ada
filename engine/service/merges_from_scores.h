// The merge list that makes rank-ordered BPE (Hugging Face's BPE model)
// tokenize as SentencePiece's score-ordered BPE does (llama.cpp's SPM
// tokenizer, Rill's "llama" model without merges): one merge (left, right)
// for every way of splitting a vocabulary token into two tokens, ranked by
// the merged token's score, highest first. This is what transformers'
// SentencePiece converter derives from a tokenizer.model.
#ifndef RILL_ENGINE_SERVICE_MERGES_FROM_SCORES_H_
#define RILL_ENGINE_SERVICE_MERGES_FROM_SCORES_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/tokenizer_spec.h"

namespace rill::engine::service {

using Merge = std::pair<std::string, std::string>;

// InvalidArgument when `spec` has no score per token (score-ordered BPE
// then has no order a merge list could reproduce).
absl::StatusOr<std::vector<Merge>> MergesFromScores(const tokenizer::TokenizerSpec& spec);

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_MERGES_FROM_SCORES_H_
