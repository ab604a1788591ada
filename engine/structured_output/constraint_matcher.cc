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
      bitmask_((vocab_size_ + 31) / 32, 0) {}

ConstraintMatcher::~ConstraintMatcher() = default;

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
    bool accepted = false;
    try {
      accepted = matcher_->AcceptToken(outputs[i]);
    } catch (const std::exception& e) {
      LOG_FIRST_N(ERROR, 10) << "grammar AcceptToken failed: " << e.what();
    }
    if (!accepted) {
      return absl::InternalError(absl::StrCat("token ", outputs[i], " at output position ", i,
                                              " breaks the request's grammar"));
    }
    accepted_.push_back(outputs[i]);
  }
  return absl::OkStatus();
}

void ConstraintMatcher::Mask(float* logits, int64_t vocab) {
  FillBitmask();
  ApplyBitmask(logits, vocab);
}

void ConstraintMatcher::FillBitmask() {
  DLTensor t{};
  int64_t shape[1] = {static_cast<int64_t>(bitmask_.size())};
  t.data = bitmask_.data();
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
    std::fill(bitmask_.begin(), bitmask_.end(), 0);
    for (int id : matcher_->GetStopTokenIds()) {
      if (id >= 0 && id < vocab_size_) bitmask_[id / 32] |= static_cast<int32_t>(1u << (id % 32));
    }
  }
}

void ConstraintMatcher::ApplyBitmask(float* logits, int64_t vocab) const {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t covered = std::min<int64_t>(vocab, vocab_size_);
  for (int64_t w = 0; w * 32 < covered; ++w) {
    const uint32_t bits = static_cast<uint32_t>(bitmask_[w]);
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
