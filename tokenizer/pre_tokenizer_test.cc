#include "tokenizer/pre_tokenizer.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include "tokenizer/test_util.h"

namespace rill::tokenizer {
namespace {

std::vector<std::string> Pieces(PreTokenizerType t, const std::string& s) {
  std::vector<std::string> out;
  for (std::string_view p : PreTokenize(t, s)) out.emplace_back(p);
  return out;
}

using V = std::vector<std::string>;

TEST(PreTokenizerTest, Gpt2Basics) {
  EXPECT_EQ(Pieces(PreTokenizerType::kGpt2, "Hello  world's 123!!"),
            (V{"Hello", " ", " world", "'s", " 123", "!!"}));
  EXPECT_EQ(Pieces(PreTokenizerType::kGpt2, "a   \nb  "),
            (V{"a", "   ", "\n", "b", "  "}));
}

TEST(PreTokenizerTest, SmolLmIsolatesDigits) {
  EXPECT_EQ(Pieces(PreTokenizerType::kSmolLm, "x 123a"),
            (V{"x", " ", "1", "2", "3", "a"}));
}

TEST(PreTokenizerTest, Llama3) {
  EXPECT_EQ(Pieces(PreTokenizerType::kLlama3, "I'M 12345 ok\n\n  x"),
            (V{"I", "'M", " ", "123", "45", " ok", "\n\n", " ", " x"}));
  EXPECT_EQ(Pieces(PreTokenizerType::kQwen2, "ab12"), (V{"ab", "1", "2"}));
}

TEST(PreTokenizerTest, Qwen35MarksJoinLetters) {
  // U+0301 (combining acute) stays in the word; Qwen2 splits it off.
  EXPECT_EQ(Pieces(PreTokenizerType::kQwen35, "re\u0301sume\u0301 12"),
            (V{"re\u0301sume\u0301", " ", "1", "2"}));
  EXPECT_EQ(Pieces(PreTokenizerType::kQwen2, "e\u0301"), (V{"e", "\u0301"}));
}

TEST(PreTokenizerTest, UnknownName) {
  const absl::StatusOr<PreTokenizerType> bad = PreTokenizerFromName("nonsense");
  ASSERT_FALSE(bad.ok());
  // The error names the pre-tokenizer and lists what is supported.
  EXPECT_NE(bad.status().message().find("'nonsense'"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("supported: default, gpt2"), std::string::npos)
      << bad.status();
  EXPECT_EQ(*PreTokenizerFromName("llama-bpe"), PreTokenizerType::kLlama3);
  EXPECT_EQ(*PreTokenizerFromName("qwen35"), PreTokenizerType::kQwen35);
  EXPECT_TRUE(PreTokenizerIgnoresMerges(PreTokenizerType::kLlama3));
  EXPECT_FALSE(PreTokenizerIgnoresMerges(PreTokenizerType::kQwen2));
}

// Exact parity with the `tokenizers` library's regex Split on a corpus.
TEST(PreTokenizerTest, MatchesHuggingFaceRegexes) {
  const std::string dir = testing::ReferenceDir();
  ASSERT_FALSE(dir.empty()) << "reference generation failed";
  const std::pair<const char*, PreTokenizerType> kinds[] = {
      {"gpt2", PreTokenizerType::kGpt2},
      {"smollm", PreTokenizerType::kSmolLm},
      {"llama3", PreTokenizerType::kLlama3},
      {"qwen2", PreTokenizerType::kQwen2},
      {"qwen35", PreTokenizerType::kQwen35}};
  for (const auto& [name, type] : kinds) {
    const auto lines =
        testing::ReadLines(dir + "/pretok_" + std::string(name) + ".tsv");
    ASSERT_GE(lines.size(), 2000u) << name;
    int failures = 0;
    for (const std::string& line : lines) {
      const auto cols = testing::SplitTabs(line);
      ASSERT_EQ(cols.size(), 2u);
      const std::string text = testing::HexDecode(cols[0]);
      V expected;
      for (const std::string& h : testing::ParseHexList(cols[1])) {
        expected.push_back(testing::HexDecode(h));
      }
      const V got = Pieces(type, text);
      if (got != expected && ++failures <= 5) {
        std::string g, e;
        for (auto& p : got) g += "[" + p + "]";
        for (auto& p : expected) e += "[" + p + "]";
        ADD_FAILURE() << name << " text hex " << cols[0] << "\n got " << g
                      << "\n want " << e;
      }
    }
    EXPECT_EQ(failures, 0) << name;
  }
}

}  // namespace
}  // namespace rill::tokenizer
