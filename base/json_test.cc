#include "base/json.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "tests/util/test_seed.h"

namespace rill::base::json {
namespace {

JsonValue MustParse(const std::string& s) {
  absl::StatusOr<JsonValue> v = ParseJson(s);
  EXPECT_TRUE(v.ok()) << s << ": " << v.status();
  return v.ok() ? *v : JsonValue();
}

TEST(JsonTest, ParsesAllTypes) {
  JsonValue v = MustParse(
      R"( {"a": 1, "b": -2.5e1, "c": "x", "d": [true, false, null], "e": {}, "f": []} )");
  ASSERT_TRUE(v.is_object());
  EXPECT_EQ(v.object_members().size(), 6u);
  EXPECT_EQ(v.Find("a")->AsInt64(), 1);
  EXPECT_DOUBLE_EQ(v.Find("b")->number_value(), -25.0);
  EXPECT_EQ(v.Find("b")->AsInt64(), -25);
  EXPECT_EQ(v.Find("c")->string_value(), "x");
  const auto& d = v.Find("d")->array_items();
  ASSERT_EQ(d.size(), 3u);
  EXPECT_TRUE(d[0].is_bool() && d[0].bool_value());
  EXPECT_TRUE(d[1].is_bool() && !d[1].bool_value());
  EXPECT_TRUE(d[2].is_null());
  EXPECT_TRUE(v.Find("e")->is_object());
  EXPECT_TRUE(v.Find("f")->is_array());
  EXPECT_EQ(v.Find("zz"), nullptr);
}

TEST(JsonTest, StringEscapes) {
  JsonValue v = MustParse(R"("a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20ac\ud83d\ude00")");
  EXPECT_EQ(v.string_value(), "a\"b\\c/d\b\f\n\r\tA\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  // Raw UTF-8 passes through.
  EXPECT_EQ(MustParse("\"\xC4\xA0hi\"").string_value(), "\xC4\xA0hi");
  // \u0000 is a legal escape and yields a NUL byte.
  EXPECT_EQ(MustParse(R"("a\u0000b")").string_value(), std::string("a\0b", 3));
}

TEST(JsonTest, ExactIntegers) {
  EXPECT_EQ(MustParse("9007199254740993").AsInt64(), int64_t{9007199254740993});
  EXPECT_EQ(MustParse("-9223372036854775808").AsInt64(), INT64_MIN);
  EXPECT_EQ(MustParse("9223372036854775808").AsInt64(), std::nullopt);
  EXPECT_EQ(MustParse("18446744073709551615").AsUint64(), UINT64_MAX);
  EXPECT_EQ(MustParse("1.5").AsInt64(), std::nullopt);
  EXPECT_EQ(MustParse("1e3").AsInt64(), 1000);
  EXPECT_EQ(MustParse("-1").AsUint64(), std::nullopt);
  EXPECT_EQ(MustParse("\"1\"").AsInt64(), std::nullopt);
}

TEST(JsonTest, DuplicateKeysLastWins) {
  JsonValue v = MustParse(R"({"k": 1, "k": 2})");
  EXPECT_EQ(v.object_members().size(), 2u);
  EXPECT_EQ(v.Find("k")->AsInt64(), 2);
}

TEST(JsonTest, RejectsInvalid) {
  const char* kBad[] = {
      "", " ", "{", "}", "[", "[1,]", "[1 2]", "{\"a\"}", "{\"a\":}", "{a:1}", "{\"a\":1,}",
      "01", "1.", ".5", "-", "1e", "+1", "tru", "nul", "\"abc", "\"\\x\"", "\"\\u12\"",
      "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"a\nb\"", "\"\xFF\"", "\"\xC0\xAF\"",
      "\"\xED\xA0\x80\"", "\"\xF4\x90\x80\x80\"", "\"\xE2\x82\"", "1 2", "[]]", "NaN", "Infinity",
  };
  for (const char* s : kBad) {
    absl::StatusOr<JsonValue> v = ParseJson(s);
    EXPECT_FALSE(v.ok()) << "accepted: " << s;
    if (!v.ok()) {
      EXPECT_NE(v.status().message().find("offset"), std::string::npos);
    }
  }
}

TEST(JsonTest, DepthLimit) {
  std::string ok = std::string(100, '[') + std::string(100, ']');
  EXPECT_TRUE(ParseJson(ok).ok());
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  absl::StatusOr<JsonValue> v = ParseJson(deep);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("too deep"), std::string::npos);
  JsonParseOptions opts;
  opts.max_depth = 3;
  EXPECT_TRUE(ParseJson("[[[1]]]", opts).ok());
  EXPECT_FALSE(ParseJson("[[[[1]]]]", opts).ok());
  EXPECT_FALSE(ParseJson("{\"a\":{\"b\":{\"c\":{}}}}", opts).ok());
}

TEST(JsonTest, RandomMutationsNeverCrash) {
  const std::string seed_doc =
      R"({"model": {"vocab": {"a": 0, "\u00e9": 1}, "merges": ["a b", "c d"]}, "x": [1.5e-3, -0, null, true]})";
  ASSERT_TRUE(ParseJson(seed_doc).ok());
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(0));
  std::printf("JsonTest.RandomMutationsNeverCrash seed=%u\n", seed);
  std::mt19937 rng(seed);
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s = seed_doc;
    int edits = 1 + rng() % 4;
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % s.size();
      switch (rng() % 3) {
        case 0: s[pos] = static_cast<char>(rng()); break;
        case 1: s.erase(pos, 1 + rng() % 3); break;
        default: s.insert(pos, 1, "{}[]\",:\\u0e"[rng() % 12]); break;
      }
      if (s.empty()) s = "x";
    }
    if (ParseJson(s).ok()) ++accepted;
  }
  // Sanity: some mutations (e.g. inside strings) remain valid JSON.
  EXPECT_GT(accepted, 0);
}

// QuoteJsonString is what ParseJson reads back, byte for byte.
TEST(JsonTest, QuotedStringsParseBack) {
  const std::string samples[] = {"",
                                 "plain",
                                 "quote \" and \\ slash",
                                 "tab\tnew\nline\r",
                                 std::string("nul\0byte", 8),
                                 "\x01\x1f control",
                                 "caf\xc3\xa9 \xe2\x82\xac"};
  for (const std::string& s : samples) {
    const std::string quoted = QuoteJsonString(s);
    absl::StatusOr<JsonValue> v = ParseJson(quoted);
    ASSERT_TRUE(v.ok()) << quoted << ": " << v.status();
    EXPECT_EQ(v->string_value(), s) << quoted;
  }
  EXPECT_EQ(QuoteJsonString("a\"b\x01"), "\"a\\\"b\\u0001\"");
}

}  // namespace
}  // namespace rill::base::json
