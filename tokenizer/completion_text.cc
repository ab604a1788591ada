#include "tokenizer/completion_text.h"

#include <algorithm>
#include <utility>

namespace rill::tokenizer {

CompletionText::CompletionText(const BpeTokenizer* tokenizer, bool skip_special_tokens,
                               StopStringOptions stop)
    : detokenizer_(tokenizer, skip_special_tokens), stop_(std::move(stop)) {}

bool CompletionText::Push(int32_t token_id) {
  if (finished_) return false;
  ++num_tokens_;
  absl::StatusOr<std::string> piece = detokenizer_.Push(token_id);
  if (!piece.ok() || piece->empty()) return false;
  const size_t old_size = held_.size();
  held_ += *piece;
  if (num_tokens_ <= stop_.min_tokens) {
    Release();
    return false;
  }
  // A match cannot start in text_ (Release keeps every tail that could
  // start one), so searching held_ finds every new match. Only a match
  // that ends in this token's text counts (one before min_tokens may still
  // sit in the held tail); take the earliest-starting.
  size_t best = std::string::npos;
  const std::string* which = nullptr;
  for (const std::string& s : stop_.stop) {
    if (s.empty()) continue;
    const size_t from = old_size >= s.size() ? old_size - s.size() + 1 : 0;
    const size_t pos = held_.find(s, from);
    if (pos != std::string::npos && pos < best) {
      best = pos;
      which = &s;
    }
  }
  if (which == nullptr) {
    Release();
    return false;
  }
  text_.append(held_, 0, best + (stop_.include_stop_str_in_output ? which->size() : 0));
  held_.clear();
  finished_ = true;
  stop_string_ = *which;
  return true;
}

void CompletionText::Finish() {
  if (finished_) return;
  held_ += detokenizer_.Flush();
  text_ += held_;
  held_.clear();
  finished_ = true;
}

void CompletionText::Release() {
  // Keep the longest suffix of held_ that is a proper prefix of a stop string.
  size_t keep = 0;
  for (const std::string& s : stop_.stop) {
    if (s.empty()) continue;
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k) {
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
    }
  }
  text_.append(held_, 0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
}

}  // namespace rill::tokenizer
