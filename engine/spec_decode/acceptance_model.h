// Per-position acceptance estimates of n-gram drafts: what the engine needs
// to price a draft before verifying it (draft_length_choice.h).
//
// P(draft token j is accepted | tokens 0..j-1 were) is counted engine-wide
// per kind of match (how many tokens matched before the draft, and whether the
// sequence's previous draft was accepted whole, i.e. a copy run goes on) and
// per position, with exponential forgetting so the counts follow the
// workload. Each sequence then scales those odds by how its own drafts did
// against them (accepted / expected tokens, also forgetting): a sequence
// that copies gets long drafts, one that rewrites gets none.
// Not thread-safe: the engine loop owns it.
#ifndef RILL_ENGINE_SPEC_DECODE_ACCEPTANCE_MODEL_H_
#define RILL_ENGINE_SPEC_DECODE_ACCEPTANCE_MODEL_H_

#include <array>
#include <vector>

namespace rill::engine::spec_decode {

// What is known of a draft before it is verified.
struct DraftContext {
  int match_n = 0;             // Tokens that matched before it (ngram_proposer.h).
  bool continues_run = false;  // The sequence's previous draft was accepted whole.
};

// One sequence's record (kept on its Request).
struct SequenceAcceptance {
  double accepted = 0.0;  // Draft tokens accepted (forgetting).
  double expected = 0.0;  // What the engine-wide estimates expected of the same drafts.
  bool last_accepted_whole = false;
};

class AcceptanceModel {
 public:
  // Positions counted; later ones share the last count.
  static constexpr int kPositions = 16;

  AcceptanceModel();

  // p[j] for j < k: P(token j accepted | tokens before it were), for a draft
  // of sequence `seq` with context `ctx`. Each in (0, 1).
  void Estimate(const DraftContext& ctx, const SequenceAcceptance& seq, int k,
                std::vector<double>* p) const;
  // Counts a verified draft of `proposed` tokens whose first `accepted` were
  // accepted, engine-wide and into `seq`.
  void Record(const DraftContext& ctx, int proposed, int accepted, SequenceAcceptance* seq);

 private:
  static constexpr int kMatchClasses = 4;  // Matches of 1, 2, 3-7, 8+ tokens.
  struct Count {
    double accepted;
    double reached;
  };
  static int Class(const DraftContext& ctx);
  // The engine-wide estimate, without the sequence's own factor.
  double Base(int cls, int j) const;

  std::array<std::array<Count, kPositions>, 2 * kMatchClasses> counts_;
};

}  // namespace rill::engine::spec_decode

#endif  // RILL_ENGINE_SPEC_DECODE_ACCEPTANCE_MODEL_H_
