#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda/check/kernel_checks.h"
#include "kernels/cuda/cuda_kernels.h"

namespace rill::kernels::cuda::check {
namespace {

using ref::Bf16;

Row CheckOneGemm(std::mt19937& rng, GemmContext* ctx, int m, int n, int k, bool f32) {
  const std::string name = std::string("gemm ") + (f32 ? "f32-out " : "bf16 ") + std::to_string(m) +
                           "x" + std::to_string(n) + "x" + std::to_string(k);
  auto x = RandomBf16(rng, size_t(m) * k), w = RandomBf16(rng, size_t(n) * k, -0.1, 0.1);
  DevBuf<Bf16> dx(x), dw(w);
  std::vector<float> r(size_t(m) * n);
  ref::Gemm(x.data(), w.data(), r.data(), m, n, k);
  std::vector<float> got;
  int err;
  if (f32) {
    DevBuf<float> dy(r.size());
    dy.PoisonNow();
    err = Gemm(ctx, dx.get(), dw.get(), dy.get(), m, n, k, true);
    got = dy.Download();
  } else {
    DevBuf<Bf16> dy(r.size());
    dy.PoisonNow();
    err = Gemm(ctx, dx.get(), dw.get(), dy.get(), m, n, k, false);
    got = ref::ToFloat(dy.Download());
  }
  if (err) return Failed(name, ErrorString(err));
  return Compared(name, MaxRelError(got, r), f32 ? 2e-3 : kBf16Tol);
}

std::vector<float> RandomLogits(std::mt19937& rng, int rows, int vocab) {
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> l(size_t(rows) * vocab);
  for (auto& x : l) x = d(rng);
  return l;
}

Row CheckSample(std::mt19937& rng, int vocab) {
  const int rows = 96;
  auto logits = RandomLogits(rng, rows, vocab);
  std::vector<SamplingParams> params(rows);
  for (int r = 0; r < rows; ++r) {
    SamplingParams& p = params[r];
    p.seed = rng();
    p.step = r;
    // Odd rows draw with the caller's uniform (the serving engine's, from
    // the request's generator), even rows with SampleUniform(seed, step).
    if (r % 2 == 1) p.uniform = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    switch (r % 6) {
      case 0:
        p.temperature = 0.0f;
        break;  // greedy
      case 1:
        p.temperature = 1.0f;
        break;  // plain
      case 2:
        p.temperature = 0.7f;
        p.top_k = 50;
        break;
      case 3:
        p.temperature = 1.3f;
        p.top_p = 0.9f;
        break;
      case 4:
        p.temperature = 1.0f;
        p.min_p = 0.05f;
        break;
      case 5:
        p.temperature = 0.8f;
        p.top_k = 200;
        p.top_p = 0.8f;
        p.min_p = 0.01f;
        break;
    }
    // Half the top_k rows draw in descending logit order (the host
    // sampler's order with top_k, as serving asks).
    if (p.top_k > 0 && r % 12 >= 6) p.descending = 1;
  }
  DevBuf<float> dl(logits);
  DevBuf<SamplingParams> dp(params);
  DevBuf<int32_t> dtok(rows), dtok2(rows);
  dtok.PoisonNow();
  dtok2.PoisonNow();
  int err = Sample(dl.get(), dp.get(), dtok.get(), rows, vocab, nullptr);
  if (!err) err = Sample(dl.get(), dp.get(), dtok2.get(), rows, vocab, nullptr);
  if (err) return Failed("sample", ErrorString(err));
  auto tok = dtok.Download(), tok2 = dtok2.Download();
  int same = 0, outside = 0, greedy_wrong = 0, nondeterministic = 0;
  for (int r = 0; r < rows; ++r) {
    std::vector<bool> kept;
    const int32_t want = ref::Sample(logits.data() + size_t(r) * vocab, params[r], vocab, &kept);
    same += tok[r] == want;
    nondeterministic += tok[r] != tok2[r];
    if (tok[r] < 0 || tok[r] >= vocab || !kept[tok[r]]) ++outside;
    if (params[r].temperature == 0.0f && tok[r] != want) ++greedy_wrong;
  }
  // Float summation order may move a draw that lands on a boundary to a
  // neighbouring kept token; anything else is a bug.
  const double mismatch = 1.0 - double(same) / rows;
  const bool pass = outside == 0 && greedy_wrong == 0 && nondeterministic == 0 && mismatch <= 0.05;
  return {"sample t/top-k/top-p/min-p vocab " + std::to_string(vocab), pass, mismatch,
          "mismatch frac",
          "outside kept set " + std::to_string(outside) + ", greedy wrong " +
              std::to_string(greedy_wrong) + ", rerun differs " + std::to_string(nondeterministic)};
}

// Penalties, logit_bias and min_tokens masks as the engine sends them:
// sparse per-row edits, some rows with none, tokens out of range skipped.
Row CheckLogitEdits(std::mt19937& rng, int vocab) {
  const int rows = 33;
  auto logits = RandomLogits(rng, rows, vocab);
  std::vector<LogitEdit> edits;
  std::vector<int32_t> offsets = {0};
  for (int r = 0; r < rows; ++r) {
    const int n = r % 3 == 0 ? 0 : 1 + int(rng() % 300);
    for (int i = 0; i < n; ++i) {
      LogitEdit e;
      // Distinct tokens per row (7919 is prime, so co-prime to the
      // vocabulary sizes checked, and n < vocab), the last one out of range.
      e.token = i == n - 1 ? vocab + 5 : int((size_t(i) * 7919 + r) % vocab);
      e.repetition = i % 2 ? 1.0f : 1.3f;
      e.subtract = i % 3 ? 0.0f : 0.25f * i;
      e.add = i % 5 ? 0.0f : -2.5f;
      e.mask = i % 11 == 0;
      edits.push_back(e);
    }
    offsets.push_back(int32_t(edits.size()));
  }
  std::vector<float> want = logits;
  ref::ApplyLogitEdits(want.data(), edits.data(), offsets.data(), rows, vocab);
  DevBuf<float> dl(logits);
  DevBuf<LogitEdit> de(edits);
  DevBuf<int32_t> doff(offsets);
  int err = ApplyLogitEdits(dl.get(), de.get(), doff.get(), rows, vocab, nullptr);
  if (err) return Failed("logit edits", ErrorString(err));
  const std::vector<float> got = dl.Download();
  int differ = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]));
    differ += !same;
  }
  // The same float operations in the same order: bitwise equal.
  return {"logit edits vocab " + std::to_string(vocab), differ == 0, double(differ),
          "differing logits", std::to_string(edits.size()) + " edits"};
}

// The engine's top logprobs: ids in the reference's order (exact: a ranking
// of the same floats), values to 1e-4; rows with ties and k = 0 included.
Row CheckTopLogprobs(std::mt19937& rng, int vocab) {
  const int rows = 10, max_k = kMaxTopLogprobs;
  auto logits = RandomLogits(rng, rows, vocab);
  for (int i = 0; i < vocab; ++i) {  // row 8: quantised, so many exact ties
    float& x = logits[size_t(8) * vocab + i];
    x = std::round(x);
  }
  const std::vector<int32_t> ks = {1, 5, 20, 32, 0, 3, 20, 7, 32, 2};
  DevBuf<float> dl(logits), dlp(size_t(rows) * max_k);
  DevBuf<int32_t> dk(ks), dids(size_t(rows) * max_k);
  dids.PoisonNow();
  int err = TopLogprobs(dl.get(), dk.get(), dids.get(), dlp.get(), rows, vocab, max_k, nullptr);
  if (err) return Failed("top logprobs", ErrorString(err));
  const std::vector<int32_t> ids = dids.Download();
  const std::vector<float> lps = dlp.Download();
  int wrong_ids = 0;
  double worst = 0;
  for (int r = 0; r < rows; ++r) {
    const auto want = ref::TopLogprobs(logits.data() + size_t(r) * vocab, ks[r], vocab);
    for (size_t j = 0; j < want.size(); ++j) {
      wrong_ids += ids[size_t(r) * max_k + j] != want[j].first;
      worst = std::max(worst, double(std::fabs(lps[size_t(r) * max_k + j] - want[j].second)));
    }
  }
  return {"top logprobs vocab " + std::to_string(vocab), wrong_ids == 0 && worst <= 1e-4, worst,
          "max abs error", "wrong ids " + std::to_string(wrong_ids)};
}

Row CheckLogprobs(std::mt19937& rng, int vocab) {
  const int rows = 17;
  auto logits = RandomLogits(rng, rows, vocab);
  std::vector<int32_t> tok(rows);
  for (int r = 0; r < rows; ++r) tok[r] = rng() % vocab;
  DevBuf<float> dl(logits), dout(rows);
  DevBuf<int32_t> dt(tok);
  dout.PoisonNow();
  int err = Logprobs(dl.get(), dt.get(), dout.get(), rows, vocab, nullptr);
  if (err) return Failed("logprobs", ErrorString(err));
  std::vector<float> r(rows);
  for (int i = 0; i < rows; ++i)
    r[i] = ref::Logprob(logits.data() + size_t(i) * vocab, tok[i], vocab);
  return Compared("logprobs vocab " + std::to_string(vocab), MaxRelError(dout.Download(), r), 1e-4);
}

}  // namespace

std::vector<Row> CheckGemm(std::mt19937& rng) {
  GemmContext* ctx = nullptr;
  int err = GemmCreate(nullptr, &ctx);
  if (err) return {Failed("gemm context", ErrorString(err))};
  std::vector<Row> rows = {
      CheckOneGemm(rng, ctx, 1, 960, 576, false),
      CheckOneGemm(rng, ctx, 37, 576, 1536, false),
      CheckOneGemm(rng, ctx, 256, 3072, 576, false),
      CheckOneGemm(rng, ctx, 5, 49152, 576, true),
  };
  GemmDestroy(ctx);
  return rows;
}

std::vector<Row> CheckSampling(std::mt19937& rng) {
  return {CheckSample(rng, 49152), CheckSample(rng, 1000), CheckLogitEdits(rng, 49152),
          CheckTopLogprobs(rng, 49152), CheckLogprobs(rng, 49152)};
}

}  // namespace rill::kernels::cuda::check
