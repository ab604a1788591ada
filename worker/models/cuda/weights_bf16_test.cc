#include "worker/models/cuda/weights_bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/cuda/reference.h"
#include "tests/util/test_seed.h"
#include "worker/models/cuda/tiny_llama_gguf.h"

namespace rill::worker {
namespace {

using namespace tiny_gguf;  // NOLINT: the tiny model's constants

uint16_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(FloatToBf16, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(FloatToBf16(FromBits(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(FromBits(0x7f800001u)))));  // low-bit NaN
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
}

TEST(FloatToBf16, MatchesKernelReference) {
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(0));
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 100000; ++i) {
    const float f = FromBits(rng());
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToBf16(f), kernels::cuda::ref::ToBf16(f)) << "bits " << std::hex << Bits(f);
  }
}

absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> Load(const std::string& name,
                                                                 bool bias) {
  const std::string path = TmpPath(name);
  absl::Status s = TinyLlamaGguf(2, bias).WriteFile(path);
  if (!s.ok()) return s;
  return worker::loader::LoadCheckpoint(path);
}

TEST(BuildLayerBf16, FusesQkvAndGateUpRowBlocks) {
  auto ck = Load("fuse.gguf", /*bias=*/false);
  ASSERT_TRUE(ck.ok()) << ck.status();
  LayerBf16 L;
  ASSERT_TRUE(BuildLayerBf16(**ck, 1, &L).ok());
  const int64_t qd = kHeads * kHd, kvd = kKv * kHd;
  ASSERT_EQ(L.qkv.size(), static_cast<size_t>((qd + 2 * kvd) * kH));
  for (int64_t r = 0; r < qd + 2 * kvd; ++r) {
    for (int64_t c = 0; c < kH; ++c) {
      float want;
      if (r < qd) {
        want = PlainValue(r * kH + c);
      } else if (r < qd + kvd) {
        want = NegValue((r - qd) * kH + c);
      } else {
        want = HalfValue((r - qd - kvd) * kH + c);
      }
      ASSERT_EQ(Bf16ToFloat(L.qkv[r * kH + c]), want) << "row " << r << " col " << c;
    }
  }
  ASSERT_EQ(L.gate_up.size(), static_cast<size_t>(2 * kFfn * kH));
  for (int64_t r = 0; r < 2 * kFfn; ++r) {
    for (int64_t c = 0; c < kH; ++c) {
      const float want = r < kFfn ? PlainValue(r * kH + c) : NegValue((r - kFfn) * kH + c);
      ASSERT_EQ(Bf16ToFloat(L.gate_up[r * kH + c]), want) << "row " << r;
    }
  }
  EXPECT_EQ(L.o.size(), static_cast<size_t>(kH * qd));
  EXPECT_EQ(L.down.size(), static_cast<size_t>(kH * kFfn));
  EXPECT_EQ(Bf16ToFloat(L.down[kH * kFfn - 1]), PlainValue(kH * kFfn - 1));
  EXPECT_EQ(Bf16ToFloat(L.ffn_norm[3]), HalfValue(3));
  EXPECT_TRUE(L.qkv_bias.empty());
}

TEST(BuildLayerBf16, ConcatenatesQkvBiases) {
  auto ck = Load("bias.gguf", /*bias=*/true);
  ASSERT_TRUE(ck.ok()) << ck.status();
  LayerBf16 L;
  ASSERT_TRUE(BuildLayerBf16(**ck, 0, &L).ok());
  const int64_t qd = kHeads * kHd, kvd = kKv * kHd;
  ASSERT_EQ(L.qkv_bias.size(), static_cast<size_t>(qd + 2 * kvd));
  EXPECT_EQ(Bf16ToFloat(L.qkv_bias[1]), PlainValue(1));
  EXPECT_EQ(Bf16ToFloat(L.qkv_bias[qd + 1]), NegValue(1));
  EXPECT_EQ(Bf16ToFloat(L.qkv_bias[qd + kvd + 1]), HalfValue(1));
}

TEST(BuildLayerBf16, MissingLayerIsNotFound) {
  auto ck = Load("missing.gguf", false);
  ASSERT_TRUE(ck.ok()) << ck.status();
  LayerBf16 L;
  EXPECT_EQ(BuildLayerBf16(**ck, 2, &L).code(), absl::StatusCode::kNotFound);
}

TEST(AppendMatrixBf16, WrongShapeNamesTensor) {
  auto ck = Load("shape.gguf", false);
  ASSERT_TRUE(ck.ok()) << ck.status();
  std::vector<uint16_t> out;
  absl::Status s = AppendMatrixBf16(**ck, "blk.0.attn_q", kH, kH + 1, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("blk.0.attn_q"), absl::string_view::npos);
}

}  // namespace
}  // namespace rill::worker
