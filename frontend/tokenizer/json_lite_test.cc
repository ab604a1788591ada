#include "frontend/tokenizer/json_lite.h"

#include <gtest/gtest.h>

namespace rill::tokenizer::json {
namespace {

TEST(JsonLiteTest, ParsesValues) {
  absl::StatusOr<Value> v = Parse(
      R"( {"a": [1, -2.5e1, true, false, null], "s": "x\n\u00e9\ud83d\ude00\"",
           "o": {}} )");
  ASSERT_TRUE(v.ok()) << v.status();
  const auto& a = v->Find("a")->AsArray();
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0].AsNumber(), 1);
  EXPECT_EQ(a[1].AsNumber(), -25);
  EXPECT_TRUE(a[2].AsBool());
  EXPECT_TRUE(a[4].is_null());
  EXPECT_EQ(v->Find("s")->AsString(), "x\n\xC3\xA9\xF0\x9F\x98\x80\"");
  EXPECT_TRUE(v->Find("o")->is_object());
  EXPECT_EQ(v->Find("missing"), nullptr);
}

TEST(JsonLiteTest, RejectsMalformed) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "\"\\x\"", "01x",
                          "[1] 2", "\"a\nb\""}) {
    EXPECT_FALSE(Parse(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace rill::tokenizer::json
