#include "tokenizer/output_shaper.h"

#include <algorithm>

namespace rill::tokenizer {

OutputShaper::OutputShaper(OutputMode mode, int n, CumulativeListing listing)
    : mode_(mode), listing_(listing), completions_(std::max(n, 1)) {}

void OutputShaper::Finish(int index) {
  Completion& c = completions_[index];
  if (c.finished) return;
  c.finished = true;
  ++num_finished_;
}

std::optional<CompletionSlice> OutputShaper::Take(int index, const std::string& text,
                                                  size_t num_tokens) {
  Completion& c = completions_[index];
  const bool changed = text.size() > c.sent_text || num_tokens > c.sent_tokens ||
                       (c.finished && !c.reported_finished);
  const bool listed = mode_ == OutputMode::kFinalOnly ||
                      (mode_ == OutputMode::kCumulative &&
                       listing_ == CumulativeListing::kEvery) ||
                      changed;
  if (!listed) return std::nullopt;
  const bool delta = mode_ == OutputMode::kDelta;
  CompletionSlice s;
  s.index = index;
  const size_t from_text = delta ? std::min(c.sent_text, text.size()) : 0;
  s.text = text.substr(from_text);
  s.token_begin = delta ? std::min(c.sent_tokens, num_tokens) : 0;
  s.token_end = num_tokens;
  s.finished = c.finished;
  if (c.finished) c.reported_finished = true;
  c.sent_text = text.size();
  c.sent_tokens = num_tokens;
  return s;
}

}  // namespace rill::tokenizer
