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
// Draft-model drafts (draft_model_proposer.h) are greedy, so one-hot too.
#include <algorithm>
#include <utility>

#include <glog/logging.h>

#include "engine/engine_core.h"
#include "engine/spec_decode/draft_length.h"
#include "engine/spec_decode/ngram_proposer.h"
#include "engine/structured_output/constraint_matcher.h"

namespace rill::engine {
namespace {

// How many leading tokens of `draft` r's grammar accepts after its outputs
// (0 if its matcher cannot follow them).
size_t GrammarAcceptedPrefix(Request* r, const std::vector<int32_t>& draft) {
  if (!r->matcher->Sync(r->output_token_ids).ok()) return 0;
  return static_cast<size_t>(r->matcher->AcceptablePrefix(draft));
}

}  // namespace

void EngineCore::ProposeDrafts(const SchedulerOutput& plan, DraftBudget* budget) {
  drafts_.resize(plan.chunks.size());
  for (std::vector<int32_t>& d : drafts_) d.clear();
  if (!spec_.enabled() || scheduler_.num_running() >= spec_.disable_batch_size) return;
  const bool use_draft_model = spec_.num_draft_tokens > 0;
  if (use_draft_model && draft_ == nullptr) return;
  const int max_k = spec_.max_draft_tokens();
  std::vector<spec_decode::DraftModelProposer::Want> wants;
  std::vector<size_t> want_chunks;
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
    const int64_t k = budget->Limit(c, std::min<int64_t>({r->draft_length, max_k, room}));
    if (k <= 0) continue;
    if (use_draft_model) {
      // One batch of draft forwards for all of them, below. Nothing is
      // taken yet: each asks for what is left now, and the drafts that come
      // back take their tokens in plan order.
      wants.push_back({r->seq_no, r->AllTokens(), static_cast<int>(k)});
      want_chunks.push_back(i);
      continue;
    }
    std::vector<int32_t> draft = spec_decode::ProposeNgramDraftCapped(
        r->AllTokens(), spec_.ngram_min_n, spec_.ngram_max_n, static_cast<int>(k));
    if (r->matcher != nullptr) draft.resize(GrammarAcceptedPrefix(r, draft));
    if (draft.empty()) continue;
    // A draft never preempts anyone: without free blocks it is dropped.
    if (!blocks_.Allocate(r->seq_no, c.start_pos + 1 + static_cast<int64_t>(draft.size()))) {
      continue;
    }
    budget->Take(c, static_cast<int64_t>(draft.size()));
    drafts_[i] = std::move(draft);
  }
  if (!wants.empty()) ProposeFromDraftModel(plan, wants, want_chunks, budget);
}

void EngineCore::ProposeFromDraftModel(
    const SchedulerOutput& plan, const std::vector<spec_decode::DraftModelProposer::Want>& wants,
    const std::vector<size_t>& chunks, DraftBudget* budget) {
  // The draft's catch-up forward takes at most a step's token budget.
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<std::vector<int32_t>>> drafts =
      draft_->Propose(wants, scheduler_.config().max_num_batched_tokens);
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

EngineCoreOutput EngineCore::AdvanceVerified(Request* r, const ScheduledChunk& c,
                                             const std::vector<int32_t>& draft,
                                             std::vector<SampledRow> tokens) {
  const int proposed = static_cast<int>(draft.size());
  const int accepted = static_cast<int>(tokens.size()) - 1;
  spec_stats_.Record(proposed, accepted);
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
