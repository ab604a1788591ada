#include "engine/spec_decode/ngram_proposer.h"

#include <algorithm>

namespace rill::engine::spec_decode {
namespace {

// How far back a match is followed to rank occurrences (and to report it).
constexpr int64_t kLongestMatchLookedAt = 32;

}  // namespace

std::vector<int32_t> ProposeNgramDraft(absl::Span<const int32_t> tokens, int min_n, int max_n,
                                       int k) {
  return FindNgramDraft(tokens, min_n, max_n, k).tokens;
}

NgramDraft FindNgramDraft(absl::Span<const int32_t> tokens, int min_n, int max_n, int k) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (k <= 0) return {};
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
    const absl::Span<const int32_t> suffix = tokens.subspan(len - n, n);
    int64_t best_start = -1;  // Where the best continuation starts.
    int64_t best_len = 0;
    int64_t best_match = 0;
    // An occurrence at i ends before the suffix does, so it is followed by at
    // least one token.
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (tokens[i + n - 1] != suffix[n - 1] ||
          !std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) {
        continue;
      }
      const int64_t follows = std::min<int64_t>(k, len - (i + n));
      if (follows < best_len) continue;
      // How far the match goes back past the n tokens: the source a copy
      // run follows matches far back, a chance recurrence does not.
      int64_t match = n;
      const int64_t limit = std::min<int64_t>(kLongestMatchLookedAt, i + n);
      while (match < limit && tokens[i + n - 1 - match] == tokens[len - 1 - match]) ++match;
      if (follows > best_len || match > best_match) {
        best_start = i + n;
        best_len = follows;
        best_match = match;
        if (best_len == k && best_match == kLongestMatchLookedAt) break;
      }
    }
    if (best_len > 0) {
      return {std::vector<int32_t>(tokens.begin() + best_start,
                                   tokens.begin() + best_start + best_len),
              static_cast<int>(best_match)};
    }
  }
  return {};
}

void CapWeakMatch(int max_n, NgramDraft* draft) {
  if (draft->match_n == 1 && max_n > 1 && draft->tokens.size() > 1) draft->tokens.resize(1);
}

}  // namespace rill::engine::spec_decode
