#include "worker/models/batch_invariance_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace rill::worker {

double RelativeL2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return a.size() == b.size() ? std::sqrt(num / (den + 1e-30)) : INFINITY;
}

InvarianceRun RunAloneBatchedChunked(CausalLm* model, std::mt19937* rng, int32_t token_lo,
                                     int32_t token_hi, int num_sequences, int chunk,
                                     int blocks_per_sequence, int block_size) {
  InvarianceRun run;
  std::uniform_int_distribution<int32_t> token(token_lo, token_hi);
  std::uniform_int_distribution<int> len(1, 40);
  run.context.resize(num_sequences);
  run.fresh.resize(num_sequences);
  for (int s = 0; s < num_sequences; ++s) {
    const int ctx = s % 3 == 0 ? 0 : len(*rng);
    const int n = s % 2 == 0 ? 1 + len(*rng) : 1;
    for (int i = 0; i < ctx; ++i) run.context[s].push_back(token(*rng));
    for (int i = 0; i < n; ++i) run.fresh[s].push_back(token(*rng));
  }
  auto table = [&](int s) {
    std::vector<int32_t> t;
    for (int i = 0; i < blocks_per_sequence; ++i) t.push_back(i * num_sequences + s);
    return t;
  };
  auto new_cache = [&] {
    absl::StatusOr<PagedKvCache> c =
        PagedKvCache::Create(model->CacheShape(blocks_per_sequence * num_sequences, block_size));
    EXPECT_TRUE(c.ok()) << c.status();
    return std::make_unique<PagedKvCache>(std::move(*c));
  };
  // Writes sequence s's context into `cache` in pieces of `piece` tokens.
  auto prefill = [&](PagedKvCache* cache, int s, size_t piece) {
    const std::vector<int32_t>& ctx = run.context[s];
    for (size_t done = 0; done < ctx.size();) {
      const size_t n = std::min(piece, ctx.size() - done);
      ForwardBatch b;
      b.sequences.push_back({std::vector<int32_t>(ctx.begin() + done, ctx.begin() + done + n),
                             static_cast<int32_t>(done), table(s), false});
      ForwardOutput o;
      absl::Status st = model->Forward(b, cache, &o);
      EXPECT_TRUE(st.ok()) << st;
      done += n;
    }
  };
  auto step = [&](PagedKvCache* cache, int first, int end) {
    ForwardBatch b;
    for (int s = first; s < end; ++s) {
      b.sequences.push_back(
          {run.fresh[s], static_cast<int32_t>(run.context[s].size()), table(s), true});
    }
    ForwardOutput o;
    absl::Status st = model->Forward(b, cache, &o);
    EXPECT_TRUE(st.ok()) << st;
    o.logits.resize(end - first);
    return o.logits;
  };
  for (int s = 0; s < num_sequences; ++s) {
    auto cache = new_cache();
    prefill(cache.get(), s, SIZE_MAX);
    run.alone.push_back(step(cache.get(), s, s + 1)[0]);
  }
  auto whole = new_cache();
  for (int s = 0; s < num_sequences; ++s) prefill(whole.get(), s, SIZE_MAX);
  run.batched = step(whole.get(), 0, num_sequences);
  auto pieces = new_cache();
  for (int s = 0; s < num_sequences; ++s) prefill(pieces.get(), s, chunk);
  run.chunked = step(pieces.get(), 0, num_sequences);
  return run;
}

}  // namespace rill::worker
