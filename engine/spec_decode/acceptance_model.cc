#include "engine/spec_decode/acceptance_model.h"

#include <algorithm>

namespace rill::engine::spec_decode {
namespace {

// Before any draft of a kind was verified: a coin flip, worth two drafts.
constexpr double kPriorAccepted = 1.0;
constexpr double kPriorReached = 2.0;
// Engine-wide counts halve over ~350 verified tokens of a kind; a
// sequence's own record over ~3 drafts (it may stop copying at any time).
constexpr double kEngineKeep = 0.998;
constexpr double kSequenceKeep = 0.8;
// A sequence's factor on the odds: its accepted / expected tokens, with one
// token of each added so a first draft moves it only so far.
constexpr double kSequencePrior = 1.0;
constexpr double kMinP = 0.01, kMaxP = 0.99;

}  // namespace

AcceptanceModel::AcceptanceModel() {
  for (auto& per_class : counts_) per_class.fill({kPriorAccepted, kPriorReached});
}

int AcceptanceModel::Class(const DraftContext& ctx) {
  const int match = ctx.match_n >= 8 ? 3 : ctx.match_n >= 3 ? 2 : ctx.match_n >= 2 ? 1 : 0;
  return 2 * match + (ctx.continues_run ? 1 : 0);
}

double AcceptanceModel::Base(int cls, int j) const {
  const Count& c = counts_[cls][std::min(j, kPositions - 1)];
  return c.accepted / c.reached;
}

void AcceptanceModel::Estimate(const DraftContext& ctx, const SequenceAcceptance& seq, int k,
                               std::vector<double>* p) const {
  const int cls = Class(ctx);
  const double factor = (seq.accepted + kSequencePrior) / (seq.expected + kSequencePrior);
  p->resize(std::max(k, 0));
  for (int j = 0; j < k; ++j) {
    const double base = std::clamp(Base(cls, j), kMinP, kMaxP);
    const double odds = factor * base / (1.0 - base);
    (*p)[j] = std::clamp(odds / (1.0 + odds), kMinP, kMaxP);
  }
}

void AcceptanceModel::Record(const DraftContext& ctx, int proposed, int accepted,
                             SequenceAcceptance* seq) {
  if (proposed <= 0) return;
  const int cls = Class(ctx);
  double expected = 0.0, reach = 1.0;
  for (int j = 0; j < proposed; ++j) {
    reach *= std::clamp(Base(cls, j), kMinP, kMaxP);
    expected += reach;
  }
  // Positions up to the first rejection were reached; all but it accepted.
  const int reached = std::min(proposed, accepted + 1);
  for (int j = 0; j < reached; ++j) {
    Count& c = counts_[cls][std::min(j, kPositions - 1)];
    c.accepted = kEngineKeep * c.accepted + (j < accepted ? 1.0 : 0.0);
    c.reached = kEngineKeep * c.reached + 1.0;
  }
  seq->accepted = kSequenceKeep * seq->accepted + accepted;
  seq->expected = kSequenceKeep * seq->expected + expected;
  seq->last_accepted_whole = accepted >= proposed;
}

}  // namespace rill::engine::spec_decode
