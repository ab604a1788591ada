// Offline replay of n-gram drafting over a finished greedy generation: a
// greedy speculative run emits exactly the tokens of a plain one, so the
// drafts the engine would propose at each step, and how many of them the
// target accepts, follow from the prompt and the plain run's outputs alone.
// Shows where proposals fail (no match, wrong continuation, a draft cut short
// by its length) without timing noise, with the engine's own proposer and
// draft-length policy (engine/spec_decode).
#ifndef RILL_BENCH_SPEC_DECODE_BENCH_NGRAM_REPLAY_H_
#define RILL_BENCH_SPEC_DECODE_BENCH_NGRAM_REPLAY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/spec_decode/acceptance_model.h"
#include "engine/spec_decode/spec_decode_config.h"

namespace rill::bench {

struct NgramReplayStats {
  int64_t decode_tokens = 0;  // Outputs after the first (which the prefill samples).
  int64_t forwards = 0;       // Decode steps that emitted them.
  int64_t no_draft = 0;       // Steps whose suffix never occurred before.
  int64_t drafts = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  int64_t all_accepted = 0;   // Drafts accepted whole.
  // Of those, drafts the match continued past: a longer draft would have
  // had `cut_short_tokens` more tokens accepted.
  int64_t cut_short = 0;
  int64_t cut_short_tokens = 0;
  int64_t first_wrong = 0;    // Drafts rejected at their first token.
  int64_t later_wrong = 0;    // Rejected after at least one accepted token.
  // The forwards' time in plain decode steps, by ReplayVariant::step_cost
  // (0 without it).
  double step_cost = 0.0;

  double tokens_per_forward() const {
    return forwards > 0 ? static_cast<double>(decode_tokens) / forwards : 0.0;
  }
  // Decode speed-up over one token per forward when a forward verifying d
  // draft tokens costs (1 + token_cost * d) plain decode steps.
  double SpeedupByStepCost() const {
    return step_cost > 0 ? static_cast<double>(decode_tokens) / step_cost : 0.0;
  }
  double SpeedupAt(double token_cost) const {
    const double cost = static_cast<double>(forwards) + token_cost * static_cast<double>(drafted);
    return cost > 0 ? static_cast<double>(decode_tokens) / cost : 0.0;
  }
  void Add(const NgramReplayStats& o);
};

// Policy variants tried offline instead of the engine's (for the engine's
// own, leave the defaults).
struct ReplayVariant {
  // A draft from a suffix match shorter than short_match_n tokens is cut to
  // short_match_k tokens (0: the engine's CapWeakMatch).
  int short_match_n = 0;
  int short_match_k = 1;
  int max_k = 0;             // The longest draft; 0: the config's.
  bool grow_by_one = false;  // A draft accepted whole grows the next by 1 (the engine: x2).
  // [d]: a forward verifying d draft tokens, in plain decode steps ([0] = 1;
  // verify_cost prints it). Sizes past its end extrapolate its last step.
  std::vector<double> step_cost;
  // Non-null: the engine's priced draft lengths (draft_length_choice.h) with
  // these acceptance estimates (kept across prompts, as the engine's are)
  // and step_cost as the measured step times, instead of the draft-length rule.
  engine::spec_decode::AcceptanceModel* priced = nullptr;
};

// Replays the decode of `outputs` after `prompt` with n-gram drafting as
// configured (max_tokens = outputs.size()).
NgramReplayStats ReplayNgram(const std::vector<int32_t>& prompt,
                             const std::vector<int32_t>& outputs,
                             const engine::spec_decode::SpecDecodeConfig& spec,
                             const ReplayVariant& variant = {});

// One table row: label, the counts above and the speed-ups at `token_cost`
// and at a tenth of a decode step per verified token.
std::string FormatReplayRow(const std::string& label, const NgramReplayStats& s,
                            double token_cost);
std::string ReplayHeader();

}  // namespace rill::bench

#endif  // RILL_BENCH_SPEC_DECODE_BENCH_NGRAM_REPLAY_H_
