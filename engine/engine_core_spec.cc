// EngineCore's speculative decoding: n-gram drafts proposed after the
// scheduler planned the step, verified in the same ragged forward, and the
// KV cache rolled back past the rejected ones.
//
// Why sampling stays exact. A prompt-lookup draft is deterministic: its
// proposal q is one-hot on the draft token x. Standard speculative sampling
// accepts x with probability min(1, p(x) / q(x)) = p(x) and on rejection
// draws from max(p - q, 0) normalised, which is p without x, renormalised.
// Drawing y ~ p and accepting when y == x (else emitting y) gives exactly
// that: P(accept) = p(x), and P(y | rejected) = p(y) / (1 - p(x)). So each
// position is sampled by the request's own Sampler from the same processed
// logits as without speculation (penalties, logit_bias and min_tokens see
// the tokens accepted before that position), one draw per emitted token:
// greedy outputs are identical, and so are seeded ones, draw for draw.
//
// With a grammar, "the same processed logits" include the grammar's mask at
// each position: the matcher is advanced through the draft while the masks
// are filled (one per position, during the forward), and the tokens after a
// rejection are rolled back; a draft token the grammar rejects could never
// be sampled, so the draft ends before it.
// Draft-model drafts (draft_model_proposer.h) are greedy, so one-hot too,
// except for requests that sample from the whole distribution: their draft
// tokens are sampled from the draft's q = softmax(logits / T) and verified
// with the general rule (VerifySampledDraft), which accepts more of them
// than a one-hot q does when the draft is uncertain. That keeps the output
// distribution, but not seeded outputs draw for draw.
#include <algorithm>
#include <utility>

#include <glog/logging.h>

#include "engine/engine_core.h"
#include "engine/logits_processor.h"
#include "engine/spec_decode/draft_length.h"
#include "engine/spec_decode/draft_length_choice.h"
#include "engine/spec_decode/ngram_proposer.h"
#include "engine/step_time_model.h"
#include "engine/structured_output/constraint_matcher.h"
#include "kernels/cpu/ops.h"

namespace rill::engine {
namespace {

// How many leading tokens of `draft` r's grammar accepts after its outputs
// (0 if its matcher cannot follow them).
size_t GrammarAcceptedPrefix(Request* r, const std::vector<int32_t>& draft) {
  if (!r->matcher->Sync(r->output_token_ids).ok()) return 0;
  return static_cast<size_t>(r->matcher->AcceptablePrefix(draft));
}

// The seed of r's draft generator (sampled proposals): r's seed and its
// sequence number, mixed (SplitMix64's finaliser) so that requests with
// nearby seeds get unrelated streams; a plain XOR made some of them equal.
uint64_t DraftSeed(const Request& r) {
  uint64_t z = r.params.seed + 0x9E3779B97F4A7C15ULL * (static_cast<uint64_t>(r.seq_no) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

void EngineCore::ProposeDrafts(const SchedulerOutput& plan, DraftBudget* budget) {
  drafts_.resize(plan.chunks.size());
  for (std::vector<int32_t>& d : drafts_) d.clear();
  draft_probs_.resize(plan.chunks.size());
  for (std::vector<float>& q : draft_probs_) q.clear();
  draft_contexts_.assign(plan.chunks.size(), {});
  if (!spec_.enabled() || scheduler_.num_running() >= spec_.disable_batch_size) return;
  const bool use_draft_model = spec_.num_draft_tokens > 0;
  if (use_draft_model && draft_ == nullptr) return;
  const int max_k = spec_.max_draft_tokens();
  std::vector<spec_decode::DraftModelProposer::Want> wants;
  std::vector<size_t> want_chunks;
  std::vector<size_t> ngram_chunks;  // Decode chunks with an n-gram proposal.
  const int64_t max_len = scheduler_.config().max_model_len;
  for (size_t i = 0; i < plan.chunks.size() && !budget->exhausted(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    Request* r = c.request;
    // Decode steps only: the last token is computed now and a token was
    // sampled before (so the request is past its prefill).
    if (c.num_tokens != 1 || r->output_token_ids.empty() || c.start_pos + 1 != r->num_tokens()) {
      continue;
    }
    if (r->draft_length == 0) r->draft_length = max_k;
    // The emitted tokens (accepted + 1) stay within max_tokens, the
    // positions within max_model_len.
    const int64_t outputs = static_cast<int64_t>(r->output_token_ids.size());
    const int64_t room =
        std::min<int64_t>(r->params.max_tokens - outputs, max_len - r->num_tokens()) - 1;
    if (use_draft_model) {
      const int64_t k = budget->Limit(c, std::min<int64_t>({r->draft_length, max_k, room}));
      if (k <= 0) continue;
      // One batch of draft forwards for all of them, below. Nothing is
      // taken yet: each asks for what is left now, and the drafts that come
      // back take their tokens in plan order.
      wants.push_back({r->seq_no, r->AllTokens(), static_cast<int>(k),
                       SampledDraftTemperature(*r), DraftSeed(*r)});
      want_chunks.push_back(i);
      continue;
    }
    const int64_t k = std::min<int64_t>(max_k, room);
    if (k <= 0) continue;
    spec_decode::NgramDraft found = spec_decode::FindNgramDraft(
        r->AllTokens(), spec_.ngram_min_n, spec_.ngram_max_n, static_cast<int>(k));
    if (r->matcher != nullptr) found.tokens.resize(GrammarAcceptedPrefix(r, found.tokens));
    draft_contexts_[i] = {found.match_n, r->spec_acceptance.last_accepted_whole};
    r->spec_acceptance.last_accepted_whole = false;  // Until a draft of it is accepted whole.
    if (found.tokens.empty()) continue;
    drafts_[i] = std::move(found.tokens);
    ngram_chunks.push_back(i);
  }
  if (!wants.empty()) ProposeFromDraftModel(plan, wants, want_chunks, budget);
  if (ngram_chunks.empty()) return;
  ChooseNgramDraftLengths(plan, ngram_chunks);
  for (size_t i : ngram_chunks) {
    const ScheduledChunk& c = plan.chunks[i];
    std::vector<int32_t>& draft = drafts_[i];
    draft.resize(static_cast<size_t>(budget->Limit(c, static_cast<int64_t>(draft.size()))));
    // A draft never preempts anyone: without free blocks it is dropped.
    if (draft.empty() ||
        !blocks_.Allocate(c.request->seq_no, c.start_pos + 1 + static_cast<int64_t>(draft.size()))) {
      draft.clear();
      continue;
    }
    budget->Take(c, static_cast<int64_t>(draft.size()));
  }
}

void EngineCore::ChooseNgramDraftLengths(const SchedulerOutput& plan,
                                         const std::vector<size_t>& chunks) {
  const StepTimeModel& model = scheduler_.slo_budget().model();
  const auto by_rule = [&] {
    for (size_t i : chunks) {
      spec_decode::NgramDraft d{std::move(drafts_[i]), draft_contexts_[i].match_n};
      spec_decode::CapWeakMatch(spec_.ngram_max_n, &d);
      if (static_cast<int>(d.tokens.size()) > plan.chunks[i].request->draft_length) {
        d.tokens.resize(plan.chunks[i].request->draft_length);
      }
      drafts_[i] = std::move(d.tokens);
    }
  };
  if (!spec_.price_ngram_drafts) {
    by_rule();
    return;
  }
  // The decodes' step without drafts: one token each.
  StepShape decodes;
  for (const ScheduledChunk& c : plan.chunks) {
    if (c.num_tokens == 1 && !c.request->output_token_ids.empty() &&
        c.start_pos + 1 == c.request->num_tokens()) {
      decodes.AddChunk(c.start_pos, 1);
    }
  }
  // What a draft token adds to the step is unknown until steps of the
  // decodes' size and of a larger size drafts can reach were measured.
  // First the decodes' own size: no drafts for a few steps (kMinExact).
  if (model.RecentTime(decodes.tokens) <= absl::ZeroDuration()) {
    for (size_t i : chunks) drafts_[i].clear();
    return;
  }
  // Then the per-sequence draft length rule (draft_length.h; a weak match
  // cut to one token), whose drafts measure larger sizes; the sizes between
  // measured ones are priced optimistically (below), so the choice measures
  // them too.
  int total = 0;
  for (size_t i : chunks) total += static_cast<int>(drafts_[i].size());
  bool larger_measured = false;
  for (int m = 1; m <= total && !larger_measured; ++m) {
    larger_measured = model.RecentTime(decodes.tokens + m) > absl::ZeroDuration();
  }
  if (!larger_measured) {
    by_rule();
    return;
  }
  std::vector<std::vector<double>> accept(chunks.size());
  double mean_pos = 0.0;  // Where the draft tokens sit, for the linear model's key reads.
  for (size_t o = 0; o < chunks.size(); ++o) {
    const size_t i = chunks[o];
    const int k = static_cast<int>(drafts_[i].size());
    acceptance_.Estimate(draft_contexts_[i], plan.chunks[i].request->spec_acceptance, k,
                         &accept[o]);
    mean_pos += static_cast<double>(k) * static_cast<double>(plan.chunks[i].start_pos + 1);
  }
  if (total > 0) mean_pos /= total;
  // Step time with m draft tokens: measured for that step size where it
  // was (recently, at least a few times), else the linear model's, kept
  // between the measured sizes around it: an unmeasured size is never
  // priced above a larger measured one.
  std::vector<double> seconds(total + 1);
  for (int m = 0; m <= total; ++m) {
    const absl::Duration measured = model.RecentTime(decodes.tokens + m);
    if (measured > absl::ZeroDuration()) {
      seconds[m] = absl::ToDoubleSeconds(measured);
      continue;
    }
    StepShape with = decodes;
    with.AddChunk(static_cast<int64_t>(mean_pos), m);
    seconds[m] = std::max(absl::ToDoubleSeconds(model.Predict(with)), m > 0 ? seconds[m - 1] : 0.0);
    for (int64_t n = decodes.tokens + m + 1; n <= StepTimeModel::kExactSizes; ++n) {
      const absl::Duration above = model.RecentTime(n);
      if (above <= absl::ZeroDuration()) continue;
      seconds[m] = std::min(seconds[m], absl::ToDoubleSeconds(above));
      break;
    }
  }
  const double rate = decode_seconds_ > 0.0 ? decode_tokens_ / decode_seconds_ : 0.0;
  const std::vector<int> lengths = spec_decode::ChooseDraftLengths(
      accept, static_cast<double>(decodes.tokens), [&](int m) { return seconds[m]; }, rate);
  for (size_t o = 0; o < chunks.size(); ++o) drafts_[chunks[o]].resize(lengths[o]);
}

void EngineCore::ProposeFromDraftModel(
    const SchedulerOutput& plan, const std::vector<spec_decode::DraftModelProposer::Want>& wants,
    const std::vector<size_t>& chunks, DraftBudget* budget) {
  // The draft's catch-up forward takes at most a step's token budget.
  const absl::Time start = absl::Now();
  std::vector<std::vector<float>> probs;
  absl::StatusOr<std::vector<std::vector<int32_t>>> drafts =
      draft_->Propose(wants, scheduler_.config().max_num_batched_tokens, &probs);
  last_step_.draft = absl::Now() - start;
  last_step_.execute += last_step_.draft;  // Part of the step's model time (the SLO's view).
  if (!drafts.ok()) {
    // The target's step goes on without drafts: its outputs do not depend on them.
    LOG_EVERY_N(ERROR, 100) << "draft model failed, no drafts this step: " << drafts.status();
    return;
  }
  for (size_t w = 0; w < wants.size(); ++w) {
    std::vector<int32_t>& draft = (*drafts)[w];
    const ScheduledChunk& c = plan.chunks[chunks[w]];
    if (c.request->matcher != nullptr) {
      draft.resize(GrammarAcceptedPrefix(c.request, draft));
    }
    draft.resize(static_cast<size_t>(budget->Limit(c, static_cast<int64_t>(draft.size()))));
    if (draft.empty() ||
        !blocks_.Allocate(c.request->seq_no, c.start_pos + 1 + static_cast<int64_t>(draft.size()))) {
      continue;
    }
    budget->Take(c, static_cast<int64_t>(draft.size()));
    drafts_[chunks[w]] = std::move(draft);
    draft_probs_[chunks[w]] = std::move(probs[w]);  // Rows past a cut draft go unread.
  }
}

std::vector<EngineCore::SampledRow> EngineCore::VerifyDraft(
    Request* r, float* rows, const std::vector<int32_t>& draft) const {
  std::vector<SampledRow> out;
  const size_t outputs_before = r->output_token_ids.size();
  for (size_t j = 0; j <= draft.size(); ++j) {
    out.push_back(SampleRow(r, rows + j * vocab_size_, static_cast<int>(j)));
    if (j == draft.size() || out.back().token != draft[j]) break;
    // The next position's penalties and min_tokens count this token.
    r->output_token_ids.push_back(draft[j]);
  }
  r->output_token_ids.resize(outputs_before);  // Advance appends them for real.
  return out;
}

float EngineCore::SampledDraftTemperature(const Request& r) const {
  const SamplingParams& p = r.params;
  const bool whole_distribution = (p.top_k <= 0 || p.top_k >= vocab_size_) && p.top_p >= 1.0f &&
                                  p.min_p <= 0.0f && r.matcher == nullptr;
  return whole_distribution && p.temperature > 0.0f ? p.temperature : 0.0f;
}

std::vector<EngineCore::SampledRow> EngineCore::VerifySampledDraft(
    Request* r, float* rows, const std::vector<int32_t>& draft, const std::vector<float>& q) const {
  CHECK_GE(q.size(), draft.size() * static_cast<size_t>(vocab_size_));
  std::vector<SampledRow> out;
  const size_t outputs_before = r->output_token_ids.size();
  const float inv_t = 1.0f / r->params.temperature;
  std::vector<float> weights(vocab_size_);
  bool all_accepted = true;
  for (size_t j = 0; j < draft.size() && all_accepted; ++j) {
    float* row = rows + j * vocab_size_;
    // The request's distribution here: its processed logits (penalties see
    // the draft tokens accepted before), softmax at its temperature.
    ProcessLogits(*r, eos_ids_, row, vocab_size_);
    const float m = *std::max_element(row, row + vocab_size_);
    const double z = kernels::cpu::ExpShiftedScaled(row, vocab_size_, m, inv_t, weights.data());
    const float* qj = q.data() + j * vocab_size_;
    const int32_t x = draft[j];
    const double p_x = weights[x] / z;
    int32_t token = x;
    if (r->sampler.Uniform() * qj[x] >= p_x) {  // Rejected: P = 1 - min(1, p(x) / q(x)).
      double total = 0.0;
      for (int64_t t = 0; t < vocab_size_; ++t) {
        total += (weights[t] = std::max(static_cast<float>(weights[t] / z) - qj[t], 0.0f));
      }
      const int64_t at = r->sampler.DrawWeighted(weights.data(), vocab_size_, total);
      token = at >= 0 ? static_cast<int32_t>(at) : x;
    }
    const float log_z = worker::LogSumExp(row, vocab_size_);
    SampledRow s{token, row[token] - log_z, {}};
    if (r->params.logprobs > 0) s.top = TopKLogprobs(row, vocab_size_, r->params.logprobs, log_z);
    out.push_back(std::move(s));
    all_accepted = token == x;
    r->output_token_ids.push_back(token);  // The next position's penalties count it.
  }
  if (all_accepted) {
    // Every draft token accepted: the bonus token from the last row.
    out.push_back(SampleRow(r, rows + draft.size() * vocab_size_, static_cast<int>(draft.size())));
  }
  r->output_token_ids.resize(outputs_before);  // Advance appends them for real.
  return out;
}

EngineCoreOutput EngineCore::AdvanceVerified(Request* r, const ScheduledChunk& c,
                                             const std::vector<int32_t>& draft,
                                             const spec_decode::DraftContext& context,
                                             std::vector<SampledRow> tokens) {
  const int proposed = static_cast<int>(draft.size());
  const int accepted = static_cast<int>(tokens.size()) - 1;
  spec_stats_.Record(proposed, accepted);
  if (spec_.num_draft_tokens == 0) acceptance_.Record(context, proposed, accepted, &r->spec_acceptance);
  r->draft_length = spec_decode::NextDraftLength(r->draft_length, proposed, accepted, spec_.max_draft_tokens());
  // The last token's and the accepted draft tokens' K/V are valid; the slots
  // of rejected ones are past num_computed_tokens, so no later step reads
  // them before rewriting them, and their blocks beyond the next position go.
  r->num_computed_tokens = c.start_pos + 1 + accepted;
  blocks_.Truncate(r->seq_no, r->num_computed_tokens + 1);
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::vector<TopLogprobs> tops;
  EngineCoreOutput last;
  for (size_t j = 0; j < tokens.size(); ++j) {
    const bool is_last = j + 1 == tokens.size();
    if (is_last && blocks_.prefix_caching()) {
      // Every computed token is an output now: cache the full blocks among
      // them (never a block past them, which may hold a rejected token).
      blocks_.CacheFullBlocks(r->seq_no, r->AllTokens(), r->num_computed_tokens, r->lora_key);
    }
    // The grammar matcher accepted the draft tokens as their masks were
    // filled; the last token's check syncs it, which rolls back the rejected
    // ones and accepts that token.
    last = Advance(r, std::move(tokens[j]), /*check_grammar=*/is_last);
    ids.insert(ids.end(), last.new_token_ids.begin(), last.new_token_ids.end());
    logprobs.insert(logprobs.end(), last.new_logprobs.begin(), last.new_logprobs.end());
    for (TopLogprobs& t : last.new_top_logprobs) tops.push_back(std::move(t));
    if (last.finished()) break;  // r is gone (EOS, a stop token or the length).
  }
  last.new_token_ids = std::move(ids);
  last.new_logprobs = std::move(logprobs);
  last.new_top_logprobs = std::move(tops);
  return last;
}

}  // namespace rill::engine
