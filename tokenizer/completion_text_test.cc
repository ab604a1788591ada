#include "tokenizer/completion_text.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>
#include "tokenizer/tiny_test_tokenizer.h"

namespace rill::tokenizer {
namespace {

class CompletionTextTest : public ::testing::Test {
 protected:
  // Pushes one token per character of `chars` (the tiny vocabulary has one
  // token per letter); returns the index of the token that matched a stop
  // string, or -1.
  int PushText(CompletionText& c, const std::string& chars) {
    for (size_t i = 0; i < chars.size(); ++i) {
      std::optional<int32_t> id = tok_->TokenToId(std::string(1, chars[i]));
      EXPECT_TRUE(id.has_value()) << chars[i];
      if (c.Push(*id)) return static_cast<int>(i);
    }
    return -1;
  }
  CompletionText Make(std::vector<std::string> stop, bool include = false, int min_tokens = 0) {
    return CompletionText(tok_.get(), /*skip_special_tokens=*/true,
                          StopStringOptions{std::move(stop), include, min_tokens});
  }

  std::unique_ptr<BpeTokenizer> tok_ = TinyTestTokenizer();
};

TEST_F(CompletionTextTest, WithoutStopStringsTextIsTheDecodedTokens) {
  CompletionText c = Make({});
  EXPECT_EQ(PushText(c, "hello"), -1);
  EXPECT_EQ(c.text(), "hello");
  c.Finish();
  EXPECT_TRUE(c.finished());
  EXPECT_EQ(c.text(), "hello");
  EXPECT_FALSE(c.stop_string().has_value());
}

TEST_F(CompletionTextTest, StopStringCutsTheTextBeforeTheMatch) {
  CompletionText c = Make({"cd"});
  EXPECT_EQ(PushText(c, "abcdef"), 3);
  EXPECT_TRUE(c.finished());
  EXPECT_EQ(c.text(), "ab");
  EXPECT_EQ(c.stop_string(), "cd");
  // Finished: later tokens add nothing.
  EXPECT_EQ(PushText(c, "x"), -1);
  EXPECT_EQ(c.text(), "ab");
}

TEST_F(CompletionTextTest, IncludeStopStringKeepsTheMatch) {
  CompletionText c = Make({"cd"}, /*include=*/true);
  EXPECT_EQ(PushText(c, "abcd"), 3);
  EXPECT_EQ(c.text(), "abcd");
}

TEST_F(CompletionTextTest, HoldsBackOnlyWhatMayStartAStopString) {
  CompletionText c = Make({"xyz"});
  PushText(c, "ax");
  EXPECT_EQ(c.text(), "a");  // "x" may start "xyz".
  PushText(c, "y");
  EXPECT_EQ(c.text(), "a");
  PushText(c, "b");
  EXPECT_EQ(c.text(), "axyb");  // "xyb" cannot: all released.
  PushText(c, "xy");
  c.Finish();  // Released as the completion ends without a match.
  EXPECT_EQ(c.text(), "axybxy");
  EXPECT_FALSE(c.stop_string().has_value());
}

TEST_F(CompletionTextTest, EarliestMatchWinsAmongStopStrings) {
  CompletionText c = Make({"cde", "bc", ""});
  EXPECT_EQ(PushText(c, "abcde"), 2);
  EXPECT_EQ(c.text(), "a");
  EXPECT_EQ(c.stop_string(), "bc");
}

TEST_F(CompletionTextTest, StreamedTextIsNeverTakenBack) {
  const std::vector<std::string> stops = {"ab", "bba", "q"};
  const std::string input = "zabbabzzbbqa";
  CompletionText c = Make(stops);
  std::string last;
  for (char ch : input) {
    c.Push(*tok_->TokenToId(std::string(1, ch)));
    ASSERT_EQ(c.text().compare(0, last.size(), last), 0) << "text shrank: " << c.text();
    last = c.text();
  }
  EXPECT_EQ(c.text(), "z");
  EXPECT_EQ(c.stop_string(), "ab");
}

TEST_F(CompletionTextTest, UnknownTokenAddsNoText) {
  CompletionText c = Make({"b"});
  EXPECT_FALSE(c.Push(-5));
  EXPECT_FALSE(c.Push(1 << 20));
  EXPECT_EQ(PushText(c, "ab"), 1);
  EXPECT_EQ(c.text(), "a");
}

TEST_F(CompletionTextTest, StopStringsWaitForMinTokens) {
  // vLLM: "c" in the first 3 tokens does not stop; the next one does.
  CompletionText c = Make({"c"}, /*include=*/false, /*min_tokens=*/3);
  EXPECT_EQ(PushText(c, "acbxc"), 4);
  EXPECT_EQ(c.text(), "acbx");
  EXPECT_EQ(c.stop_string(), "c");
}

TEST_F(CompletionTextTest, MatchMustEndAfterMinTokens) {
  // "ab" ends in token 2 (within min_tokens = 2) and stays unmatched even
  // though it still sits in the held tail as a prefix of "abz"; "bz" ends in
  // token 3 and stops.
  CompletionText c = Make({"ab", "abz", "bz"}, /*include=*/false, /*min_tokens=*/2);
  EXPECT_EQ(PushText(c, "abz"), 2);
  EXPECT_EQ(c.stop_string(), "abz");  // Earliest start wins among matches ending now.
  EXPECT_EQ(c.text(), "");
  CompletionText d = Make({"ab", "abq"}, /*include=*/false, /*min_tokens=*/2);
  EXPECT_EQ(PushText(d, "abxab"), 4);
  EXPECT_EQ(d.text(), "abx");
  EXPECT_EQ(d.stop_string(), "ab");
}

TEST_F(CompletionTextTest, MinTokensCountsTokensWithoutText) {
  CompletionText c = Make({"a"}, /*include=*/false, /*min_tokens=*/2);
  EXPECT_FALSE(c.Push(-5));  // Token 1: no text.
  EXPECT_FALSE(c.Push(*tok_->TokenToId("a")));  // Token 2: still within min_tokens.
  EXPECT_EQ(PushText(c, "ba"), 1);
  EXPECT_EQ(c.text(), "ab");
}

}  // namespace
}  // namespace rill::tokenizer
