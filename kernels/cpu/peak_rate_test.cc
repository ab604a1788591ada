#include "kernels/cpu/peak_rate.h"

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_features.h"

namespace rill::kernels::cpu {
namespace {

TEST(PeakRateTest, FmaChainsReachTheirFixedPointOnEveryThread) {
  if (!UseAvx2()) GTEST_SKIP() << "no AVX2/FMA";
  ThreadPool pool(2);
  const PeakRate r = MeasureF32FmaPeak(&pool, 100000);
  EXPECT_EQ(r.lanes, UseAvx512() ? 16 : 8);
  EXPECT_DOUBLE_EQ(r.checksum, 2.0 * 12 * r.lanes);
  EXPECT_DOUBLE_EQ(r.ops, 2.0 * r.lanes * 12 * 100000 * 2);
  EXPECT_GT(r.seconds, 0.0);
}

TEST(PeakRateTest, VnniChainsCountEveryProduct) {
  ThreadPool pool(2);
  const PeakRate r = MeasureInt16VnniPeak(&pool, 5000);
  if (r.ops == 0) GTEST_SKIP() << "no AVX-512 VNNI";
  EXPECT_DOUBLE_EQ(r.checksum, 2.0 * 16 * (66 + 12 * 2 * 5000));
  EXPECT_DOUBLE_EQ(r.ops, 2.0 * 32 * 12 * 5000 * 2);
}

TEST(PeakRateTest, ReadBandwidthReadsEveryByteOfEveryPass) {
  ThreadPool pool(2);
  const int64_t bytes = int64_t{4} << 20;
  const PeakRate r = MeasureReadBandwidth(&pool, bytes, 3);
  EXPECT_DOUBLE_EQ(r.checksum, 3.0 * bytes / 4);
  EXPECT_DOUBLE_EQ(r.ops, 3.0 * bytes);
}

}  // namespace
}  // namespace rill::kernels::cpu
