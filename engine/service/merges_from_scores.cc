#include "engine/service/merges_from_scores.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/unicode_data.h"

namespace rill::engine::service {

absl::StatusOr<std::vector<Merge>> MergesFromScores(const tokenizer::TokenizerSpec& spec) {
  if (spec.scores.size() != spec.tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a SentencePiece vocabulary without merges needs one score per token (", spec.scores.size(),
        " scores, ", spec.tokens.size(), " tokens)"));
  }
  // The first id of a text, as the tokenizer looks tokens up.
  absl::flat_hash_map<std::string_view, int32_t> ids;
  ids.reserve(spec.tokens.size());
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    ids.emplace(spec.tokens[i], static_cast<int32_t>(i));
  }
  struct Candidate {
    float score;  // Of the merged token.
    int32_t left, right;
  };
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    const std::string_view token = spec.tokens[i];
    if (ids.at(token) != static_cast<int32_t>(i)) continue;  // A duplicate: never merged into.
    // Split points on character boundaries (an invalid byte is a character,
    // as the tokenizer splits text).
    for (size_t at = 0; at < token.size();) {
      const int n = tokenizer::Utf8SequenceLength(token.substr(at));
      at += n > 0 ? n : 1;
      if (at >= token.size()) break;
      auto left = ids.find(token.substr(0, at));
      auto right = ids.find(token.substr(at));
      if (left != ids.end() && right != ids.end()) {
        candidates.push_back({spec.scores[i], left->second, right->second});
      }
    }
  }
  // Highest score first; ties (only the same merged token, in practice) by ids.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.left != b.left) return a.left < b.left;
    return a.right < b.right;
  });
  std::vector<Merge> merges;
  merges.reserve(candidates.size());
  for (const Candidate& c : candidates) merges.emplace_back(spec.tokens[c.left], spec.tokens[c.right]);
  return merges;
}

}  // namespace rill::engine::service
