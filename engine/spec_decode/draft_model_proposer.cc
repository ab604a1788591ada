#include "engine/spec_decode/draft_model_proposer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/ops.h"

namespace rill::engine::spec_decode {

DraftModelProposer::DraftModelProposer(ModelExecutor* draft)
    : draft_(draft),
      blocks_(draft->num_blocks(), draft->block_size(), /*enable_prefix_caching=*/false) {}

int32_t DraftModelProposer::Argmax(const std::vector<float>& logits) const {
  const int64_t vocab = draft_->model_config().vocab_size;
  const float* row = logits.data() + logits.size() - vocab;  // The last position's row.
  return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
}

int32_t DraftModelProposer::SampleRow(const std::vector<float>& logits, const Want& want,
                                      std::vector<float>* q) {
  const int64_t vocab = draft_->model_config().vocab_size;
  const float* row = logits.data() + logits.size() - vocab;
  const float m = *std::max_element(row, row + vocab);
  const size_t at = q->size();
  q->resize(at + vocab);
  float* out = q->data() + at;
  // The sampler's own primitives: the temperature exps and the inverse-CDF
  // draw over them; the row is then normalised into q, the draw's distribution.
  const double total = kernels::cpu::ExpShiftedScaled(row, vocab, m, 1.0f / want.temperature, out);
  auto [rng, fresh] = rngs_.try_emplace(want.seq_id, want.seed);
  const double u = std::uniform_real_distribution<double>(0.0, total)(rng->second);
  const int64_t token = kernels::cpu::CumulativeSearch(out, vocab, u);
  for (int64_t t = 0; t < vocab; ++t) out[t] = static_cast<float>(out[t] / total);
  return static_cast<int32_t>(std::max<int64_t>(token, 0));
}

absl::StatusOr<std::vector<std::vector<int32_t>>> DraftModelProposer::Propose(
    const std::vector<Want>& wants, int64_t max_batch_tokens,
    std::vector<std::vector<float>>* probs) {
  std::vector<std::vector<int32_t>> drafts(wants.size());
  if (probs != nullptr) probs->assign(wants.size(), {});
  const int64_t context = draft_->model_config().max_position_embeddings;
  const int64_t vocab = draft_->model_config().vocab_size;
  // The first forward computes what each sequence's draft cache lacks (at
  // least its last token, whose logits give the first draft token); each
  // later one feeds the previous draft token. `active[a]` is the want whose
  // chunk is batch.sequences[a]; catching_up[a]: that chunk does not reach
  // the sequence's last token (no draft from it).
  worker::ForwardBatch batch;
  std::vector<size_t> active;
  std::vector<bool> catching_up;
  int64_t budget = max_batch_tokens;
  for (size_t w = 0; w < wants.size(); ++w) {
    const Want& want = wants[w];
    const int64_t n = static_cast<int64_t>(want.tokens.size());
    // Positions written: the sequence's tokens and draft tokens 1..k-1.
    const int64_t end = n + want.k - 1;
    if (want.k < 1 || n < 1 || end > context || budget <= 0) continue;
    std::vector<int32_t>& fed = fed_[want.seq_id];
    const int64_t limit = std::min<int64_t>(static_cast<int64_t>(fed.size()), n - 1);
    int64_t keep = 0;
    while (keep < limit && fed[keep] == want.tokens[keep]) ++keep;
    // Rejected draft tokens (and anything after them) leave the cache.
    fed.resize(keep);
    blocks_.Truncate(want.seq_id, keep);
    const int64_t take = std::min(n - keep, budget);
    const bool partial = take < n - keep;
    if (!blocks_.Allocate(want.seq_id, partial ? keep + take : end)) {
      if (keep == 0) Release(want.seq_id);  // Holds nothing worth keeping.
      continue;
    }
    budget -= take;
    worker::SequenceChunk& s = batch.sequences.emplace_back();
    s.start_pos = static_cast<int32_t>(keep);
    s.tokens.assign(want.tokens.begin() + keep, want.tokens.begin() + keep + take);
    s.block_table = blocks_.BlockTable(want.seq_id);
    active.push_back(w);
    catching_up.push_back(partial);
  }
  while (!active.empty()) {
    if (absl::Status s = draft_->Execute(batch, &out_); !s.ok()) {
      ReleaseAll();  // Which K/V got written is unknown.
      return s;
    }
    if (out_.logits.size() != active.size()) {
      ReleaseAll();
      return absl::InternalError(absl::StrCat("draft model returned ", out_.logits.size(),
                                              " logits rows for ", active.size(), " sequences"));
    }
    worker::ForwardBatch next;
    std::vector<size_t> still;
    for (size_t a = 0; a < active.size(); ++a) {
      const size_t w = active[a];
      worker::SequenceChunk& s = batch.sequences[a];
      std::vector<int32_t>& fed = fed_[wants[w].seq_id];
      fed.insert(fed.end(), s.tokens.begin(), s.tokens.end());
      if (!catching_up.empty() && catching_up[a]) continue;
      if (static_cast<int64_t>(out_.logits[a].size()) < vocab) {
        ReleaseAll();
        return absl::InternalError("draft model returned a short logits row");
      }
      const int32_t token = probs != nullptr && wants[w].temperature > 0.0f
                                ? SampleRow(out_.logits[a], wants[w], &(*probs)[w])
                                : Argmax(out_.logits[a]);
      drafts[w].push_back(token);
      if (static_cast<int>(drafts[w].size()) == wants[w].k) continue;
      worker::SequenceChunk& c = next.sequences.emplace_back();
      c.start_pos = static_cast<int32_t>(s.start_pos + s.tokens.size());
      c.tokens = {token};
      c.block_table = std::move(s.block_table);  // Allocated for all k positions.
      still.push_back(w);
    }
    batch = std::move(next);
    active = std::move(still);
    catching_up.clear();  // Later forwards feed one draft token each.
  }
  return drafts;
}

void DraftModelProposer::Release(int64_t seq_id) {
  blocks_.Free(seq_id);
  fed_.erase(seq_id);
  rngs_.erase(seq_id);
}

void DraftModelProposer::ReleaseAll() {
  for (const auto& [seq_id, fed] : fed_) blocks_.Free(seq_id);
  fed_.clear();
  rngs_.clear();
}

}  // namespace rill::engine::spec_decode
