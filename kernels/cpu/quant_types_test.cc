#include "kernels/cpu/quant_types.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/util/python_runner.h"
#include "tests/util/test_seed.h"

namespace rill::kernels::cpu {
namespace {

constexpr char kScript[] = "kernels/cpu/testdata/gguf_quant_ref.py";

std::vector<char> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

std::vector<float> ReadFloats(const std::string& path) {
  std::vector<char> b = ReadFile(path);
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), f.size() * 4);
  return f;
}

// Runs the numpy reference once for the whole test binary.
class GgufReference : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = getenv("TEST_TMPDIR");
    dir_ = std::string(tmp ? tmp : "/tmp") + "/gguf_ref";
    std::string mk = "mkdir -p '" + dir_ + "'";
    ASSERT_EQ(system(mk.c_str()), 0);
    const absl::StatusOr<std::string> py = rill::tests::util::VenvPython();
    ASSERT_TRUE(py.ok()) << "no python venv: set RILL_VENV to the project venv "
                            "(with numpy and gguf installed): "
                         << py.status();
    const unsigned seed = static_cast<unsigned>(rill::tests::util::StreamSeed(0));
    printf("gguf reference seed: %u\n", seed);
    const std::string cmd = "'" + *py + "' " + kScript + " '" + dir_ + "' " + std::to_string(seed);
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char name[64];
    long n;
    while (fscanf(p, "%63s %ld", name, &n) == 2) counts_[name] = n;
    ASSERT_EQ(pclose(p), 0) << cmd;
  }
  static std::string dir_;
  static std::map<std::string, long> counts_;
};
std::string GgufReference::dir_;
std::map<std::string, long> GgufReference::counts_;

TEST(QuantTypes, SizesAndIds) {
  EXPECT_EQ(static_cast<int>(GgmlType::kQ4_1), 3);
  EXPECT_EQ(static_cast<int>(GgmlType::kBF16), 30);
  EXPECT_EQ(RowBytes(GgmlType::kQ4_1, 576), 18u * 20);
  EXPECT_EQ(RowBytes(GgmlType::kQ8_0, 576), 18u * 34);
  EXPECT_EQ(RowBytes(GgmlType::kQ6_K, 512), 2u * 210);
  EXPECT_EQ(RowBytes(GgmlType::kF16, 10), 20u);
  EXPECT_EQ(BlockElems(GgmlType::kQ5_K), 256);
  EXPECT_TRUE(GetGgmlTypeTraits(12).has_value());
  EXPECT_FALSE(GetGgmlTypeTraits(4).has_value());  // removed Q4_2
  EXPECT_EQ(GgmlTypeName(GgmlType::kQ5_1), "q5_1");
}

TEST_F(GgufReference, DequantizeMatchesNumpy) {
  const std::vector<std::pair<std::string, GgmlType>> types = {
      {"Q4_0", GgmlType::kQ4_0}, {"Q4_1", GgmlType::kQ4_1}, {"Q5_0", GgmlType::kQ5_0},
      {"Q5_1", GgmlType::kQ5_1}, {"Q8_0", GgmlType::kQ8_0}, {"Q2_K", GgmlType::kQ2_K},
      {"Q3_K", GgmlType::kQ3_K}, {"Q4_K", GgmlType::kQ4_K}, {"Q5_K", GgmlType::kQ5_K},
      {"Q6_K", GgmlType::kQ6_K}, {"F16", GgmlType::kF16},   {"BF16", GgmlType::kBF16},
  };
  for (const auto& [name, type] : types) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(counts_.count(name)) << "reference did not produce " << name;
    const long n = counts_[name];
    const std::vector<char> raw = ReadFile(dir_ + "/" + name + ".raw");
    const std::vector<float> want = ReadFloats(dir_ + "/" + name + ".f32");
    ASSERT_EQ(static_cast<long>(want.size()), n);
    ASSERT_EQ(raw.size(), RowBytes(type, n));
    std::vector<float> got(n);
    DequantizeRow(type, raw.data(), got.data(), n);
    int bad = 0;
    for (long i = 0; i < n && bad < 5; ++i) {
      // numpy and we may order the scale products differently: allow 1 ulp.
      const float tol = 1.2e-7f * std::fabs(want[i]);
      if (!(std::fabs(got[i] - want[i]) <= tol)) {
        ADD_FAILURE() << name << " element " << i << ": got " << got[i] << " want " << want[i];
        ++bad;
      }
    }
  }
}

TEST_F(GgufReference, FloatConversionsMatchNumpy) {
  const std::vector<float> x = ReadFloats(dir_ + "/conversions.f32");
  const std::vector<char> f16 = ReadFile(dir_ + "/conversions.f16");
  const std::vector<char> bf16 = ReadFile(dir_ + "/conversions.bf16");
  ASSERT_FALSE(x.empty());
  ASSERT_EQ(f16.size(), x.size() * 2);
  ASSERT_EQ(bf16.size(), x.size() * 2);
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t h, b;
    std::memcpy(&h, f16.data() + 2 * i, 2);
    std::memcpy(&b, bf16.data() + 2 * i, 2);
    ASSERT_EQ(F32ToF16(x[i]), h) << "x=" << x[i];
    ASSERT_EQ(F32ToBF16(x[i]), b) << "x=" << x[i];
  }
}

TEST(QuantTypes, HalfRoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00) continue;
    ASSERT_EQ(F32ToF16(F16ToF32(h)), h) << h;
  }
  EXPECT_TRUE(std::isinf(F16ToF32(0x7C00)));
  EXPECT_TRUE(std::isnan(F16ToF32(0x7E00)));
  EXPECT_EQ(F16ToF32(0x3C00), 1.0f);
  EXPECT_EQ(BF16ToF32(0x3F80), 1.0f);
}

}  // namespace
}  // namespace rill::kernels::cpu
