#include "worker/loader/gguf.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "tests/util/test_seed.h"
#include "worker/loader/gguf_writer.h"

namespace rill::worker::loader {
namespace {

const uint8_t* U8(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

absl::StatusOr<std::unique_ptr<GgufFile>> ParseBytes(const std::string& s) {
  return GgufFile::Parse(U8(s), s.size(), "mem.gguf");
}

std::string QuantBlockBytes(kernels::cpu::GgmlType type, int64_t elements) {
  kernels::cpu::GgmlTypeTraits t = kernels::cpu::GgmlTypeTraitsOf(type);
  return std::string(static_cast<size_t>(elements / t.block_size * t.bytes_per_block), '\x11');
}

GgufWriter SampleWriter(uint32_t version = 3) {
  GgufWriter w(version);
  w.AddUint8("u8", 200);
  w.AddInt8("i8", -100);
  w.AddUint16("u16", 60000);
  w.AddInt16("i16", -30000);
  w.AddUint32("u32", 4000000000u);
  w.AddInt32("i32", -2000000000);
  w.AddUint64("u64", 18446744073709551615ull);
  w.AddInt64("i64", -9000000000000000000ll);
  w.AddFloat32("f32", 1.5f);
  w.AddFloat64("f64", -2.25);
  w.AddBool("b", true);
  w.AddString("s", "hello");
  w.AddStringArray("sa", {"a", "", "ccc"});
  w.AddInt32Array("ia", {1, -2, 3});
  w.AddFloat32Array("fa", {0.5f, -1.0f});
  // Nested: array of arrays of uint16.
  std::vector<std::string> inner;
  for (int n = 0; n < 2; ++n) {
    std::vector<std::string> elems;
    for (uint16_t x = 0; x < n + 2; ++x) {
      uint16_t v = static_cast<uint16_t>(10 * n + x);
      elems.push_back(std::string(reinterpret_cast<const char*>(&v), 2));
    }
    inner.push_back(GgufWriter::EncodeArray(GgufValueType::kUint16, elems));
  }
  w.AddRaw("nested", GgufValueType::kArray, GgufWriter::EncodeArray(GgufValueType::kArray, inner));
  w.AddF32Tensor("a.weight", {3, 2}, {1, 2, 3, 4, 5, 6});
  w.AddTensor("q.weight", kernels::cpu::GgmlType::kQ4_1, {64, 3},
              QuantBlockBytes(kernels::cpu::GgmlType::kQ4_1, 64 * 3));
  w.AddTensor("k.weight", kernels::cpu::GgmlType::kQ6_K, {256},
              QuantBlockBytes(kernels::cpu::GgmlType::kQ6_K, 256));
  return w;
}

TEST(GgmlTypeTest, Traits) {
  EXPECT_EQ(kernels::cpu::GgmlTypeTraitsOf(kernels::cpu::GgmlType::kQ4_0).bytes_per_block, 18u);
  EXPECT_EQ(kernels::cpu::GgmlTypeTraitsOf(kernels::cpu::GgmlType::kQ8_0).bytes_per_block, 34u);
  EXPECT_EQ(kernels::cpu::GgmlTypeTraitsOf(kernels::cpu::GgmlType::kQ4_K).bytes_per_block, 144u);
  EXPECT_EQ(kernels::cpu::GgmlTypeTraitsOf(kernels::cpu::GgmlType::kQ8_K).block_size, 256);
  EXPECT_EQ(kernels::cpu::GgmlTypeTraitsOf(kernels::cpu::GgmlType::kBF16).bytes_per_block, 2u);
  EXPECT_FALSE(kernels::cpu::GetGgmlTypeTraits(4).has_value());  // Removed Q4_2.
  EXPECT_FALSE(kernels::cpu::GetGgmlTypeTraits(1000).has_value());
  int64_t ne[2] = {64, 3};
  EXPECT_EQ(kernels::cpu::GgmlTensorBytes(kernels::cpu::GgmlType::kQ4_1, ne, 2), 6u * 20u);
  int64_t bad_row[1] = {33};
  EXPECT_FALSE(
      kernels::cpu::GgmlTensorBytes(kernels::cpu::GgmlType::kQ8_0, bad_row, 1).has_value());
  int64_t huge[4] = {1 << 20, 1 << 20, 1 << 20, 1 << 20};
  EXPECT_FALSE(kernels::cpu::GgmlTensorBytes(kernels::cpu::GgmlType::kF32, huge, 4).has_value());
}

void CheckSample(const GgufFile& f, uint32_t version) {
  EXPECT_EQ(f.version(), version);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 16u);
  EXPECT_EQ(f.metadata()[0].key, "u8");
  EXPECT_EQ(*f.GetInt("u8"), 200);
  EXPECT_EQ(*f.GetInt("i8"), -100);
  EXPECT_EQ(*f.GetInt("u16"), 60000);
  EXPECT_EQ(*f.GetInt("i16"), -30000);
  EXPECT_EQ(*f.GetInt("u32"), 4000000000);
  EXPECT_EQ(*f.GetInt("i32"), -2000000000);
  EXPECT_FALSE(f.GetInt("u64").ok());  // Does not fit int64.
  EXPECT_EQ(*f.Find("u64")->AsUint64(), 18446744073709551615ull);
  EXPECT_EQ(*f.GetInt("i64"), -9000000000000000000ll);
  EXPECT_DOUBLE_EQ(*f.GetFloat("f32"), 1.5);
  EXPECT_DOUBLE_EQ(*f.GetFloat("f64"), -2.25);
  EXPECT_EQ(*f.GetBool("b"), true);
  EXPECT_EQ(*f.GetString("s"), "hello");
  EXPECT_EQ(*f.GetStringArray("sa"), (std::vector<std::string_view>{"a", "", "ccc"}));
  EXPECT_EQ(*f.GetIntArray("ia"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*f.GetFloatArray("fa"), (std::vector<float>{0.5f, -1.0f}));
  const GgufValue* nested = f.Find("nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->element_type(), GgufValueType::kArray);
  ASSERT_EQ(nested->size(), 2u);
  GgufValue second = nested->At(1);
  ASSERT_EQ(second.size(), 3u);
  EXPECT_EQ(second.element_type(), GgufValueType::kUint16);
  EXPECT_EQ(*second.At(2).AsInt64(), 12);
  // Type mismatches name the key and the file.
  absl::StatusOr<std::string_view> bad = f.GetString("u8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'u8'"), std::string::npos);
  EXPECT_NE(bad.status().message().find(f.path()), std::string::npos);
  EXPECT_TRUE(absl::IsNotFound(f.GetInt("missing").status()));

  ASSERT_EQ(f.tensors().size(), 3u);
  const GgufTensorInfo* a = f.FindTensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, kernels::cpu::GgmlType::kF32);
  EXPECT_EQ(a->ne, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(a->nbytes, 24u);
  EXPECT_EQ(a->offset, 0u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  float vals[6];
  std::memcpy(vals, a->data, 24);
  EXPECT_EQ(vals[5], 6.0f);
  const GgufTensorInfo* q = f.FindTensor("q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, kernels::cpu::GgmlType::kQ4_1);
  EXPECT_EQ(q->nbytes, 120u);
  EXPECT_EQ(q->offset, 32u);  // 24 bytes padded to 32.
  EXPECT_EQ(static_cast<const uint8_t*>(q->data), f.base() + f.data_offset() + 32);
  EXPECT_EQ(f.FindTensor("k.weight")->nbytes, 210u);
  EXPECT_EQ(f.FindTensor("nope"), nullptr);
}

TEST(GgufTest, ParsesEveryValueTypeV3) {
  std::string bytes = SampleWriter(3).Build();
  absl::StatusOr<std::unique_ptr<GgufFile>> f = ParseBytes(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  CheckSample(**f, 3);
}

TEST(GgufTest, ParsesV2) {
  std::string bytes = SampleWriter(2).Build();
  absl::StatusOr<std::unique_ptr<GgufFile>> f = ParseBytes(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  CheckSample(**f, 2);
}

TEST(GgufTest, OpensFromDisk) {
  std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") + "/t.gguf";
  ASSERT_TRUE(SampleWriter().WriteFile(path).ok());
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->path(), path);
  CheckSample(**f, 3);
  absl::StatusOr<std::unique_ptr<GgufFile>> missing = GgufFile::Open(path + ".nope");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find(path + ".nope"), std::string::npos);
}

TEST(GgufTest, CustomAlignment) {
  GgufWriter w;
  w.SetAlignment(64);
  w.AddF32Tensor("a", {3}, {1, 2, 3});
  w.AddF32Tensor("b", {2}, {4, 5});
  std::string bytes = w.Build();
  absl::StatusOr<std::unique_ptr<GgufFile>> f = ParseBytes(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->data_offset() % 64, 0u);
  EXPECT_EQ((*f)->FindTensor("b")->offset, 64u);
  float b0;
  std::memcpy(&b0, (*f)->FindTensor("b")->data, 4);
  EXPECT_EQ(b0, 4.0f);
}

void ExpectError(const std::string& bytes, const std::string& needle) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = ParseBytes(bytes);
  ASSERT_FALSE(f.ok()) << "expected failure containing: " << needle;
  EXPECT_TRUE(absl::IsInvalidArgument(f.status()) || absl::IsDataLoss(f.status())) << f.status();
  EXPECT_NE(f.status().message().find("mem.gguf"), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find(needle), std::string::npos) << f.status();
}

void PutU32(std::string* s, size_t off, uint32_t v) { std::memcpy(&(*s)[off], &v, 4); }
void PutU64(std::string* s, size_t off, uint64_t v) { std::memcpy(&(*s)[off], &v, 8); }

TEST(GgufTest, RejectsBadHeaders) {
  std::string good = SampleWriter().Build();
  std::string s = good;
  s[0] = 'X';
  ExpectError(s, "bad magic");
  s = good;
  PutU32(&s, 4, 1);
  ExpectError(s, "unsupported GGUF version 1");
  PutU32(&s, 4, 0x03000000);
  ExpectError(s, "big-endian");
  s = good;
  PutU64(&s, 8, uint64_t{1} << 60);  // tensor count
  ExpectError(s, "tensor count");
  s = good;
  PutU64(&s, 16, ~uint64_t{0});  // kv count
  ExpectError(s, "metadata count");
  ExpectError("", "truncated");
  ExpectError("GGU", "truncated");
}

TEST(GgufTest, RejectsBadValues) {
  {
    GgufWriter w;
    w.AddRaw("k", static_cast<GgufValueType>(13), "");
    ExpectError(w.Build(), "unknown value type 13");
  }
  {
    GgufWriter w;  // String length past the end.
    w.AddRaw("k", GgufValueType::kString, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8));
    ExpectError(w.Build(), "truncated");
  }
  {
    GgufWriter w;  // Huge uint32 array.
    std::string enc(12, '\0');
    PutU32(&enc, 0, 4);
    PutU64(&enc, 4, uint64_t{1} << 62);
    w.AddRaw("arr", GgufValueType::kArray, enc);
    ExpectError(w.Build(), "array 'arr'");
  }
  {
    GgufWriter w;  // Huge string array.
    std::string enc(12, '\0');
    PutU32(&enc, 0, 8);
    PutU64(&enc, 4, ~uint64_t{0});
    w.AddRaw("arr", GgufValueType::kArray, enc);
    ExpectError(w.Build(), "array 'arr'");
  }
  {
    GgufWriter w;  // Deep nesting.
    std::string v = GgufWriter::EncodeArray(GgufValueType::kUint8, {});
    for (int i = 0; i < 40; ++i) v = GgufWriter::EncodeArray(GgufValueType::kArray, {v});
    w.AddRaw("deep", GgufValueType::kArray, v);
    ExpectError(w.Build(), "nested too deeply");
  }
  {
    GgufWriter w;
    w.AddRaw("b", GgufValueType::kBool, std::string("\x07", 1));
    ExpectError(w.Build(), "bool value");
  }
  {
    GgufWriter w;
    w.AddUint32("k", 1);
    w.AddUint32("k", 2);
    ExpectError(w.Build(), "duplicate metadata key 'k'");
  }
  {
    GgufWriter w;
    w.AddUint32("general.alignment", 48);
    ExpectError(w.Build(), "general.alignment");
  }
  {
    GgufWriter w;
    w.AddUint64("general.alignment", 32);
    ExpectError(w.Build(), "general.alignment");
  }
}

// Builds a file with one tensor info whose fields are given raw.
std::string RawTensorFile(uint32_t n_dims, std::vector<uint64_t> ne, uint32_t type, uint64_t offset,
                          size_t data_bytes) {
  std::string s = "GGUF";
  auto u32 = [&](uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); };
  u32(3);
  u64(1);
  u64(0);
  u64(1);
  s += "t";
  u32(n_dims);
  for (uint64_t d : ne) u64(d);
  u32(type);
  u64(offset);
  s.append((32 - s.size() % 32) % 32, '\0');
  s.append(data_bytes, '\0');
  return s;
}

TEST(GgufTest, RejectsBadTensorInfos) {
  ASSERT_TRUE(ParseBytes(RawTensorFile(2, {4, 2}, 0, 0, 32)).ok());
  ExpectError(RawTensorFile(5, {1, 1, 1, 1, 1}, 0, 0, 32), "5 dims");
  ExpectError(RawTensorFile(0, {}, 0, 0, 32), "0 dims");
  ExpectError(RawTensorFile(2, {4, 2}, 4, 0, 32), "unknown ggml type 4");
  ExpectError(RawTensorFile(2, {4, 2}, 99, 0, 32), "unknown ggml type 99");
  ExpectError(RawTensorFile(2, {4, 2}, 0, 0, 31), "past the end");
  ExpectError(RawTensorFile(2, {4, 2}, 0, 32, 32), "past the end");
  ExpectError(RawTensorFile(2, {4, 2}, 0, 16, 64), "alignment");
  ExpectError(RawTensorFile(1, {~uint64_t{0} - 31}, 0, 0, 32), "too large");
  ExpectError(RawTensorFile(4, {1u << 20, 1u << 20, 1u << 20, 1u << 20}, 0, 0, 32), "overflow");
  ExpectError(RawTensorFile(2, {1u << 30, 1u << 30}, 0, 0, 32), "past the end");
  ExpectError(RawTensorFile(1, {33}, 8, 0, 64), "block size");
  ExpectError(RawTensorFile(1, {~uint64_t{0} - 31 + 0x8000000000000000ull}, 0, 0, 32), "");
  ExpectError(RawTensorFile(1, {4}, 0, ~uint64_t{0} - 31, 32), "past the end");
  // Duplicate names.
  GgufWriter w;
  w.AddF32Tensor("x", {1}, {1});
  w.AddF32Tensor("x", {1}, {2});
  ExpectError(w.Build(), "duplicate tensor name 'x'");
}

TEST(GgufTest, EveryTruncationFails) {
  std::string good = SampleWriter().Build();
  ASSERT_TRUE(ParseBytes(good).ok());
  // The last tensor's padding is not needed; every cut inside real content
  // must fail. Copy into an exact-size heap buffer so ASan-style tools (and
  // the reader's bounds checks) see the true end.
  size_t needed = good.size() - (32 - 210 % 32) % 32;
  for (size_t n = 0; n < needed; ++n) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[n + 1]);
    std::memcpy(buf.get(), good.data(), n);
    absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Parse(buf.get(), n, "cut.gguf");
    ASSERT_FALSE(f.ok()) << "truncated to " << n << " bytes parsed";
    EXPECT_NE(f.status().message().find("cut.gguf"), std::string::npos);
  }
}

TEST(GgufTest, RandomCorruptionNeverCrashes) {
  std::string good = SampleWriter().Build();
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(0));
  std::printf("GgufTest.RandomCorruptionNeverCrashes seed=%u\n", seed);
  std::mt19937 rng(seed);
  int ok = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s = good;
    int flips = 1 + rng() % 8;
    for (int i = 0; i < flips; ++i) s[rng() % s.size()] ^= static_cast<char>(1 + rng() % 255);
    if (rng() % 4 == 0) s.resize(rng() % s.size());
    absl::StatusOr<std::unique_ptr<GgufFile>> f = ParseBytes(s);
    if (!f.ok()) continue;
    ++ok;
    // Everything a parsed file reports must lie inside the buffer.
    for (const GgufTensorInfo& t : (*f)->tensors()) {
      const uint8_t* p = static_cast<const uint8_t*>(t.data);
      ASSERT_GE(p, U8(s));
      ASSERT_LE(p + t.nbytes, U8(s) + s.size());
    }
    for (const GgufKv& kv : (*f)->metadata()) {
      ASSERT_GE(kv.key.data(), s.data());
      ASSERT_LE(kv.key.data() + kv.key.size(), s.data() + s.size());
    }
  }
  std::printf("parsed %d of 20000 corrupted files\n", ok);
}

}  // namespace
}  // namespace rill::worker::loader
