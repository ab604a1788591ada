#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda/check/kernel_checks.h"
#include "kernels/cuda/cuda_kernels.h"

namespace rill::kernels::cuda::check {
namespace {

using ref::Bf16;

Row CheckRmsNorm(std::mt19937& rng, int rows, int hidden, bool with_residual) {
  const std::string name = std::string("rmsnorm") + (with_residual ? "+residual" : "") + " " +
                           std::to_string(rows) + "x" + std::to_string(hidden);
  auto x = RandomBf16(rng, size_t(rows) * hidden),
       res = RandomBf16(rng, size_t(rows) * hidden, -4, 4);
  auto w = RandomBf16(rng, hidden, 0.5, 1.5);
  DevBuf<Bf16> dx(x), dres(res), dw(w), dout(size_t(rows) * hidden);
  dout.PoisonNow();
  int err = RmsNormResidual(with_residual ? dx.get() : nullptr, dres.get(), dw.get(), dout.get(),
                            rows, hidden, 1e-5f, nullptr);
  if (err) return Failed(name, ErrorString(err));
  auto out = dout.Download(), res_gpu = dres.Download();
  std::vector<Bf16> out_ref(out.size());
  ref::RmsNormResidual(with_residual ? x.data() : nullptr, res.data(), w.data(), out_ref.data(),
                       rows, hidden, 1e-5f);
  if (dout.error() || dres.error()) return Failed(name, ErrorString(dout.error() | dres.error()));
  return Compared(name, std::max(MaxRelError(out, out_ref), MaxRelError(res_gpu, res)), kBf16Tol);
}

Row CheckRope(std::mt19937& rng, bool neox, int rotary_dim) {
  const int tokens = 7, qh = 9, kvh = 3, d = 64;
  const std::string name =
      std::string("rope ") + (neox ? "neox" : "interleaved") + " rot" + std::to_string(rotary_dim);
  auto q = RandomBf16(rng, size_t(tokens) * qh * d), k = RandomBf16(rng, size_t(tokens) * kvh * d);
  std::vector<int32_t> pos(tokens);
  std::uniform_int_distribution<int> pd(0, 8191);
  for (auto& p : pos) p = pd(rng);
  std::vector<float> inv(rotary_dim / 2);
  for (int i = 0; i < rotary_dim / 2; ++i) {
    // A Llama-3 style scaled table: the low frequencies divided by 8.
    inv[i] = std::pow(500000.0f, -2.0f * i / rotary_dim) * (i > rotary_dim / 4 ? 0.125f : 1.0f);
  }
  DevBuf<Bf16> dq(q), dk(k);
  DevBuf<int32_t> dpos(pos);
  DevBuf<float> dinv(inv);
  int err = Rope(dq.get(), dk.get(), dpos.get(), dinv.get(), tokens, qh, kvh, d, rotary_dim, neox,
                 nullptr);
  if (err) return Failed(name, ErrorString(err));
  auto qg = dq.Download(), kg = dk.Download();
  ref::Rope(q.data(), k.data(), pos.data(), inv.data(), tokens, qh, kvh, d, rotary_dim, neox);
  return Compared(name, std::max(MaxRelError(qg, q), MaxRelError(kg, k)), kBf16Tol);
}

Row CheckSwiGlu(std::mt19937& rng) {
  const int rows = 9, ffn = 1536;
  auto gu = RandomBf16(rng, size_t(rows) * 2 * ffn, -6, 6);
  DevBuf<Bf16> dgu(gu), dout(size_t(rows) * ffn);
  dout.PoisonNow();
  int err = SwiGlu(dgu.get(), dout.get(), rows, ffn, nullptr);
  if (err) return Failed("swiglu", ErrorString(err));
  std::vector<Bf16> r(size_t(rows) * ffn);
  ref::SwiGlu(gu.data(), r.data(), rows, ffn);
  return Compared("swiglu 9x1536", MaxRelError(dout.Download(), r), kBf16Tol);
}

Row CheckGelu(std::mt19937& rng) {
  const int n = 12345;
  auto in = RandomBf16(rng, n, -6, 6);
  DevBuf<Bf16> din(in), dout(n);
  dout.PoisonNow();
  int err = Gelu(din.get(), dout.get(), n, nullptr);
  if (err) return Failed("gelu", ErrorString(err));
  std::vector<Bf16> r(n);
  ref::Gelu(in.data(), r.data(), n);
  return Compared("gelu 12345", MaxRelError(dout.Download(), r), kBf16Tol);
}

Row CheckEmbedding(std::mt19937& rng) {
  const int vocab = 1000, hidden = 576;
  std::vector<int32_t> tokens = {0, 999, 5, -1, 1000, 42, 42};
  auto table = RandomBf16(rng, size_t(vocab) * hidden);
  DevBuf<Bf16> dt(table), dout(tokens.size() * hidden);
  DevBuf<int32_t> dtok(tokens);
  dout.PoisonNow();
  int err =
      EmbeddingLookup(dtok.get(), dt.get(), dout.get(), tokens.size(), hidden, vocab, nullptr);
  if (err) return Failed("embedding", ErrorString(err));
  std::vector<Bf16> r(tokens.size() * hidden);
  ref::EmbeddingLookup(tokens.data(), table.data(), r.data(), tokens.size(), hidden, vocab);
  const double e = MaxRelError(dout.Download(), r);
  return {"embedding (ids out of range -> 0)", e == 0, e, "max rel err", "must be exact"};
}

Row CheckKvWrite(std::mt19937& rng) {
  const int tokens = 12, kvh = 3, d = 64, slots = 64;
  auto k = RandomBf16(rng, size_t(tokens) * kvh * d), v = RandomBf16(rng, size_t(tokens) * kvh * d);
  auto kc = RandomBf16(rng, size_t(slots) * kvh * d), vc = RandomBf16(rng, size_t(slots) * kvh * d);
  std::vector<int32_t> perm(slots);
  for (int i = 0; i < slots; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> map(perm.begin(), perm.begin() + tokens);
  map[3] = -1;  // padding token
  DevBuf<Bf16> dk(k), dv(v), dkc(kc), dvc(vc);
  DevBuf<int32_t> dmap(map);
  int err =
      KvCacheWrite(dk.get(), dv.get(), dkc.get(), dvc.get(), dmap.get(), tokens, kvh, d, nullptr);
  if (err) return Failed("kv_cache_write", ErrorString(err));
  ref::KvCacheWrite(k.data(), v.data(), kc.data(), vc.data(), map.data(), tokens, kvh, d);
  const double e = std::max(MaxRelError(dkc.Download(), kc), MaxRelError(dvc.Download(), vc));
  return {"kv_cache_write (slot -1 skipped)", e == 0, e, "max rel err", "must be exact"};
}

// The fused q/k/v split, with and without a bias: without one it must copy
// exactly; with one, a single bf16 rounding of the sum.
Row CheckSplitQkv(std::mt19937& rng, bool with_bias) {
  const int tokens = 7, qd = 576, kvd = 192, width = qd + 2 * kvd;
  const std::string name = std::string("split_qkv") + (with_bias ? "+bias" : "") + " 7x960";
  auto qkv = RandomBf16(rng, size_t(tokens) * width), bias = RandomBf16(rng, width);
  DevBuf<Bf16> dqkv(qkv), dbias(bias), dq(size_t(tokens) * qd), dk(size_t(tokens) * kvd),
      dv(size_t(tokens) * kvd);
  dq.PoisonNow();
  dk.PoisonNow();
  dv.PoisonNow();
  int err = SplitQkv(dqkv.get(), with_bias ? dbias.get() : nullptr, dq.get(), dk.get(), dv.get(),
                     tokens, qd, kvd, nullptr);
  if (err) return Failed(name, ErrorString(err));
  std::vector<Bf16> q(size_t(tokens) * qd), k(size_t(tokens) * kvd), v(size_t(tokens) * kvd);
  ref::SplitQkv(qkv.data(), with_bias ? bias.data() : nullptr, q.data(), k.data(), v.data(), tokens,
                qd, kvd);
  const double e = std::max(MaxRelError(dq.Download(), q),
                            std::max(MaxRelError(dk.Download(), k), MaxRelError(dv.Download(), v)));
  if (!with_bias) return {name, e == 0, e, "max rel err", "must be exact"};
  return Compared(name, e, kBf16Tol);
}

}  // namespace

std::vector<Row> CheckElementwise(std::mt19937& rng) {
  return {CheckRmsNorm(rng, 5, 576, true),
          CheckRmsNorm(rng, 3, 4096, false),
          CheckRope(rng, true, 64),
          CheckRope(rng, false, 64),
          CheckRope(rng, true, 32),
          CheckSwiGlu(rng),
          CheckGelu(rng),
          CheckEmbedding(rng),
          CheckKvWrite(rng),
          CheckSplitQkv(rng, false),
          CheckSplitQkv(rng, true)};
}

}  // namespace rill::kernels::cuda::check
