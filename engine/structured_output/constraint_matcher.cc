#include "engine/structured_output/constraint_matcher.h"

#include <algorithm>
#include <exception>
#include <limits>

#include <glog/logging.h>

#include <dlpack/dlpack.h>
#include <xgrammar/xgrammar.h>

#include "absl/strings/str_cat.h"

namespace rill::engine::structured_output {

ConstraintMatcher::ConstraintMatcher(const CompiledConstraint& grammar)
    : grammar_(grammar),
      // Rollback depth unbounded: a recompute may roll back any suffix.
      matcher_(std::make_unique<xgrammar::GrammarMatcher>(*grammar, std::nullopt, false,
                                                          /*max_rollback_tokens=*/-1)),
      vocab_size_(grammar->GetTokenizerInfo().GetVocabSize()),
      words_((vocab_size_ + 31) / 32),
      bitmasks_(words_, 0) {}

ConstraintMatcher::~ConstraintMatcher() = default;

bool ConstraintMatcher::TryAccept(int32_t token) {
  if (matcher_->IsTerminated()) return false;
  try {
    return matcher_->AcceptToken(token);
  } catch (const std::exception& e) {
    LOG_FIRST_N(ERROR, 10) << "grammar AcceptToken failed: " << e.what();
  }
  return false;
}

absl::Status ConstraintMatcher::Sync(const std::vector<int32_t>& outputs) {
  size_t common = 0;
  while (common < accepted_.size() && common < outputs.size() &&
         accepted_[common] == outputs[common]) {
    ++common;
  }
  if (common < accepted_.size()) {
    matcher_->Rollback(static_cast<int>(accepted_.size() - common));
    accepted_.resize(common);
  }
  for (size_t i = common; i < outputs.size(); ++i) {
    // A terminated matcher (EOS accepted) takes nothing more; the sample ends there.
    if (matcher_->IsTerminated()) break;
    if (!TryAccept(outputs[i])) {
      return absl::InternalError(absl::StrCat("token ", outputs[i], " at output position ", i,
                                              " breaks the request's grammar"));
    }
    accepted_.push_back(outputs[i]);
  }
  return absl::OkStatus();
}

int ConstraintMatcher::AcceptablePrefix(absl::Span<const int32_t> draft) {
  int n = 0;
  while (n < static_cast<int>(draft.size()) && TryAccept(draft[n])) ++n;
  if (n > 0) matcher_->Rollback(n);
  return n;
}

void ConstraintMatcher::Mask(float* logits, int64_t vocab) {
  FillBitmask();
  ApplyBitmask(logits, vocab);
}

void ConstraintMatcher::FillBitmasks(absl::Span<const int32_t> draft) {
  bitmasks_.assign((draft.size() + 1) * words_, 0);
  for (size_t j = 0;; ++j) {
    FillRow(bitmasks_.data() + j * words_);
    if (j == draft.size() || !TryAccept(draft[j])) break;
    accepted_.push_back(draft[j]);
  }
}

void ConstraintMatcher::FillRow(int32_t* row) {
  DLTensor t{};
  int64_t shape[1] = {words_};
  t.data = row;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = DLDataType{kDLInt, 32, 1};
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  // Once EOS is accepted (a sample with ignore_eos goes on) xgrammar has no
  // next-token mask: only the stop tokens stay allowed, as they were. Any
  // xgrammar failure ends the sample the same way rather than the engine.
  bool filled = false;
  if (!matcher_->IsTerminated()) {
    try {
      matcher_->FillNextTokenBitmask(&t);
      filled = true;
    } catch (const std::exception& e) {
      LOG_FIRST_N(ERROR, 10) << "grammar mask failed, allowing only stop tokens: " << e.what();
    }
  }
  if (!filled) {
    std::fill(row, row + words_, 0);
    for (int id : matcher_->GetStopTokenIds()) {
      if (id >= 0 && id < vocab_size_) row[id / 32] |= static_cast<int32_t>(1u << (id % 32));
    }
  }
}

void ConstraintMatcher::ApplyBitmask(float* logits, int64_t vocab, int row) const {
  CHECK_GE(row, 0);
  CHECK_LE((row + 1) * words_, static_cast<int64_t>(bitmasks_.size()))
      << "bitmask row " << row << " was not filled";
  const int32_t* mask = bitmasks_.data() + row * words_;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t covered = std::min<int64_t>(vocab, vocab_size_);
  for (int64_t w = 0; w * 32 < covered; ++w) {
    const uint32_t bits = static_cast<uint32_t>(mask[w]);
    if (bits == 0xFFFFFFFFu) continue;
    const int64_t end = std::min<int64_t>(covered, (w + 1) * 32);
    for (int64_t i = w * 32; i < end; ++i) {
      if (((bits >> (i - w * 32)) & 1u) == 0) logits[i] = kNegInf;
    }
  }
  for (int64_t i = covered; i < vocab; ++i) logits[i] = kNegInf;
}

bool ConstraintMatcher::IsTerminated() const { return matcher_->IsTerminated(); }

}  // namespace rill::engine::structured_output
