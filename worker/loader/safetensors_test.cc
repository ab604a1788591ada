#include "worker/loader/safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "tests/util/test_seed.h"
#include "worker/loader/safetensors_writer.h"

namespace rill::worker::loader {
namespace {

absl::StatusOr<std::unique_ptr<SafetensorsFile>> ParseBytes(const std::string& s) {
  return SafetensorsFile::Parse(reinterpret_cast<const uint8_t*>(s.data()), s.size(), "mem.safetensors");
}

// Raw file from a header string and data bytes.
std::string RawFile(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data_bytes, '\0');
}

SafetensorsWriter Sample() {
  SafetensorsWriter w;
  w.AddMetadata("format", "pt");
  w.AddF32Tensor("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  w.AddTensor("h", "F16", {4}, std::string(8, '\x01'));
  w.AddTensor("b", "BF16", {1, 2}, std::string(4, '\x02'));
  return w;
}

TEST(SafetensorsTest, Parses) {
  std::string bytes = Sample().Build();
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = ParseBytes(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->tensors().size(), 3u);
  EXPECT_EQ((*f)->tensors()[0].name, "w");  // File order.
  const SafetensorsTensor* w = (*f)->Find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->type, kernels::cpu::GgmlType::kF32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w->nbytes, 24u);
  float v[6];
  std::memcpy(v, w->data, 24);
  EXPECT_EQ(v[4], 5.0f);
  EXPECT_EQ((*f)->Find("h")->type, kernels::cpu::GgmlType::kF16);
  EXPECT_EQ((*f)->Find("b")->type, kernels::cpu::GgmlType::kBF16);
  EXPECT_EQ((*f)->Find("zz"), nullptr);
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
}

void ExpectError(const std::string& bytes, const std::string& needle) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = ParseBytes(bytes);
  ASSERT_FALSE(f.ok()) << "expected failure containing: " << needle;
  EXPECT_NE(f.status().message().find("mem.safetensors"), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find(needle), std::string::npos) << f.status();
}

TEST(SafetensorsTest, RejectsBadFiles) {
  ExpectError("", "truncated");
  ExpectError(std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8), "100 MB");
  ExpectError(RawFile("{}", 0).substr(0, 9), "truncated");
  ExpectError(RawFile("[]", 0), "not a JSON object");
  ExpectError(RawFile("{", 0), "JSON parse error");
  ExpectError(RawFile(R"({"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", 1),
              "unsupported dtype BOOL");
  ExpectError(RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 8), "need 8");
  ExpectError(RawFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4), "past the data");
  ExpectError(RawFile(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0), "non-negative");
  ExpectError(RawFile(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,0]}})", 0), "non-negative");
  ExpectError(RawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8), "begin <= end");
  ExpectError(RawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 8), "data_offsets");
  ExpectError(RawFile(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 8), "dtype");
  ExpectError(RawFile(R"({"a":3})", 8), "not an object");
  ExpectError(RawFile(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}})", 8),
              "overflow");
  ExpectError(RawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})", 8),
              "overlap");
  ExpectError(RawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                      R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
              "duplicate tensor name 'a'");
  ExpectError(RawFile(R"({"__metadata__":{"k":1}})", 0), "__metadata__");
  ExpectError(RawFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551616]}})", 8),
              "data_offsets");
}

TEST(SafetensorsTest, EveryTruncationFails) {
  std::string good = Sample().Build();
  ASSERT_TRUE(ParseBytes(good).ok());
  for (size_t n = 0; n < good.size(); ++n) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[n + 1]);
    std::memcpy(buf.get(), good.data(), n);
    EXPECT_FALSE(SafetensorsFile::Parse(buf.get(), n, "cut").ok()) << n;
  }
}

TEST(SafetensorsTest, RandomCorruptionNeverCrashes) {
  std::string good = Sample().Build();
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(0));
  std::printf("SafetensorsTest.RandomCorruptionNeverCrashes seed=%u\n", seed);
  std::mt19937 rng(seed);
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s = good;
    int flips = 1 + rng() % 4;
    for (int i = 0; i < flips; ++i) s[rng() % s.size()] = "0123456789[]{}\",:-e"[rng() % 19];
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = ParseBytes(s);
    if (!f.ok()) continue;
    for (const SafetensorsTensor& t : (*f)->tensors()) {
      const char* p = static_cast<const char*>(t.data);
      ASSERT_GE(p, s.data());
      ASSERT_LE(p + t.nbytes, s.data() + s.size());
    }
  }
}

std::string TmpDir(const std::string& name) {
  const char* t = getenv("TEST_TMPDIR");
  std::string d = std::string(t ? t : "/tmp") + "/" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

TEST(SafetensorsShardsTest, UsesIndex) {
  std::string dir = TmpDir("shards_index");
  SafetensorsWriter a, b;
  a.AddF32Tensor("x", {1}, {1});
  a.AddF32Tensor("unlisted", {1}, {9});
  b.AddF32Tensor("y", {2}, {2, 3});
  ASSERT_TRUE(a.WriteFile(dir + "/model-00001-of-00002.safetensors").ok());
  ASSERT_TRUE(b.WriteFile(dir + "/model-00002-of-00002.safetensors").ok());
  std::ofstream(dir + "/model.safetensors.index.json")
      << R"({"metadata":{"total_size":12},"weight_map":{"x":"model-00001-of-00002.safetensors",)"
      << R"("y":"model-00002-of-00002.safetensors"}})";
  absl::StatusOr<std::unique_ptr<SafetensorsShards>> s = SafetensorsShards::Open(dir);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->files().size(), 2u);
  EXPECT_EQ((*s)->tensors().size(), 2u);
  ASSERT_NE((*s)->Find("y"), nullptr);
  EXPECT_EQ((*s)->Find("y")->shape, (std::vector<int64_t>{2}));
  EXPECT_EQ((*s)->Find("unlisted"), nullptr);

  std::ofstream(dir + "/model.safetensors.index.json")
      << R"({"weight_map":{"x":"model-00002-of-00002.safetensors"}})";
  s = SafetensorsShards::Open(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("tensor 'x' is not in"), std::string::npos) << s.status();

  std::ofstream(dir + "/model.safetensors.index.json") << R"({"weight_map":{"x":"../evil.safetensors"}})";
  EXPECT_FALSE(SafetensorsShards::Open(dir).ok());
}

TEST(SafetensorsShardsTest, GlobsWithoutIndex) {
  std::string dir = TmpDir("shards_glob");
  SafetensorsWriter a, b;
  a.AddF32Tensor("x", {1}, {1});
  b.AddF32Tensor("y", {1}, {2});
  ASSERT_TRUE(a.WriteFile(dir + "/a.safetensors").ok());
  ASSERT_TRUE(b.WriteFile(dir + "/b.safetensors").ok());
  absl::StatusOr<std::unique_ptr<SafetensorsShards>> s = SafetensorsShards::Open(dir);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->tensors().size(), 2u);
  ASSERT_TRUE(b.WriteFile(dir + "/c.safetensors").ok());  // "y" twice.
  s = SafetensorsShards::Open(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("'y'"), std::string::npos);
  EXPECT_TRUE(absl::IsNotFound(SafetensorsShards::Open(TmpDir("empty")).status()));
}

}  // namespace
}  // namespace rill::worker::loader
