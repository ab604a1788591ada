#include "bench/spec_decode_bench/ngram_replay.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "engine/spec_decode/draft_length.h"
#include "engine/spec_decode/draft_length_choice.h"
#include "engine/spec_decode/ngram_proposer.h"

namespace rill::bench {
namespace {

// How many leading tokens of `draft` equal the outputs from `at` on.
int64_t MatchedPrefix(const std::vector<int32_t>& draft, const std::vector<int32_t>& outputs,
                      size_t at) {
  int64_t n = 0;
  while (n < static_cast<int64_t>(draft.size()) && at + n < outputs.size() &&
         draft[n] == outputs[at + n]) {
    ++n;
  }
  return n;
}

// A draft length no policy reaches: what the match alone would have given.
constexpr int kUnboundedDraft = 64;

// A forward of d draft tokens by `cost` (ReplayVariant::step_cost).
double StepCost(const std::vector<double>& cost, int d) {
  if (cost.empty()) return 0.0;
  const int last = static_cast<int>(cost.size()) - 1;
  if (d <= last) return cost[d];
  const double slope = last > 0 ? cost[last] - cost[last - 1] : 0.0;
  return cost[last] + slope * (d - last);
}

}  // namespace

void NgramReplayStats::Add(const NgramReplayStats& o) {
  decode_tokens += o.decode_tokens;
  forwards += o.forwards;
  no_draft += o.no_draft;
  drafts += o.drafts;
  drafted += o.drafted;
  accepted += o.accepted;
  all_accepted += o.all_accepted;
  cut_short += o.cut_short;
  cut_short_tokens += o.cut_short_tokens;
  first_wrong += o.first_wrong;
  later_wrong += o.later_wrong;
  step_cost += o.step_cost;
}

NgramReplayStats ReplayNgram(const std::vector<int32_t>& prompt,
                             const std::vector<int32_t>& outputs,
                             const engine::spec_decode::SpecDecodeConfig& spec,
                             const ReplayVariant& variant) {
  NgramReplayStats s;
  if (outputs.empty()) return s;
  const int max_k = variant.max_k > 0 ? variant.max_k : spec.max_draft_tokens();
  std::vector<int32_t> tokens = prompt;
  tokens.push_back(outputs[0]);  // Sampled after the prefill.
  size_t done = 1;
  int draft_length = max_k;  // As EngineCore::ProposeDrafts.
  engine::spec_decode::SequenceAcceptance seq;
  std::vector<double> accept;
  while (done < outputs.size()) {
    const int64_t room = static_cast<int64_t>(outputs.size() - done) - 1;
    const int k = static_cast<int>(std::min<int64_t>({draft_length, max_k, room}));
    std::vector<int32_t> draft;
    engine::spec_decode::DraftContext context;
    if (variant.priced != nullptr && room > 0) {
      // As EngineCore::ChooseNgramDraftLengths, at batch 1.
      engine::spec_decode::NgramDraft found = engine::spec_decode::FindNgramDraft(
          tokens, spec.ngram_min_n, spec.ngram_max_n, static_cast<int>(std::min<int64_t>(max_k, room)));
      context = {found.match_n, seq.last_accepted_whole};
      seq.last_accepted_whole = false;
      variant.priced->Estimate(context, seq, static_cast<int>(found.tokens.size()), &accept);
      const std::vector<int> n = engine::spec_decode::ChooseDraftLengths(
          {accept}, 1.0, [&](int m) { return StepCost(variant.step_cost, m); });
      found.tokens.resize(n[0]);
      draft = std::move(found.tokens);
    } else if (k > 0) {
      engine::spec_decode::NgramDraft found =
          engine::spec_decode::FindNgramDraft(tokens, spec.ngram_min_n, spec.ngram_max_n, k);
      if (variant.short_match_n == 0) {
        engine::spec_decode::CapWeakMatch(spec.ngram_max_n, &found);  // The engine's policy.
      } else if (found.match_n < variant.short_match_n) {
        found.tokens.resize(std::min<size_t>(found.tokens.size(), variant.short_match_k));
      }
      draft = std::move(found.tokens);
    }
    const int64_t accepted = MatchedPrefix(draft, outputs, done);
    const int64_t proposed = static_cast<int64_t>(draft.size());
    s.step_cost += StepCost(variant.step_cost, static_cast<int>(proposed));
    if (variant.priced != nullptr && proposed > 0) {
      variant.priced->Record(context, static_cast<int>(proposed), static_cast<int>(accepted), &seq);
    }
    if (draft.empty()) {
      ++s.no_draft;
    } else {
      ++s.drafts;
      s.drafted += proposed;
      s.accepted += accepted;
      if (accepted == proposed) {
        ++s.all_accepted;
        const int64_t could = MatchedPrefix(
            engine::spec_decode::ProposeNgramDraft(tokens, spec.ngram_min_n, spec.ngram_max_n,
                                                   kUnboundedDraft),
            outputs, done);
        const int64_t more = std::min<int64_t>(could, room) - accepted;
        if (more > 0) {
          ++s.cut_short;
          s.cut_short_tokens += more;
        }
      } else if (accepted == 0) {
        ++s.first_wrong;
      } else {
        ++s.later_wrong;
      }
      draft_length = variant.grow_by_one && accepted == proposed
                         ? std::min(draft_length + 1, max_k)
                         : engine::spec_decode::NextDraftLength(
                               draft_length, static_cast<int>(proposed), static_cast<int>(accepted),
                               max_k);
    }
    const size_t emitted = static_cast<size_t>(accepted) + 1;
    tokens.insert(tokens.end(), outputs.begin() + done, outputs.begin() + done + emitted);
    done += emitted;
    s.decode_tokens += static_cast<int64_t>(emitted);
    ++s.forwards;
  }
  return s;
}

std::string ReplayHeader() {
  return absl::StrFormat("%-24s %6s %6s %5s %6s %6s %7s %8s %6s %9s %6s %9s %6s %6s", "prompt",
                         "tokens", "fwds", "tok/f", "x@cost", "x@0.1", "x@curve", "no match", "drafts",
                         "acc/dr", "whole", "cut(+tok)", "wrong1", "wrongN");
}

std::string FormatReplayRow(const std::string& label, const NgramReplayStats& s,
                            double token_cost) {
  return absl::StrFormat("%-24s %6d %6d %5.2f %6.2f %6.2f %7.2f %8d %6d %4d/%-4d %6d %4d(+%d) %6d %6d",
                         label, s.decode_tokens, s.forwards, s.tokens_per_forward(),
                         s.SpeedupAt(token_cost), s.SpeedupAt(0.1), s.SpeedupByStepCost(), s.no_draft, s.drafts,
                         s.accepted, s.drafted, s.all_accepted, s.cut_short, s.cut_short_tokens,
                         s.first_wrong, s.later_wrong);
}

}  // namespace rill::bench
