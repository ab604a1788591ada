// WordPiece (BERT) tokenizer parity with the PyPI `tokenizers` package on
// all-MiniLM-L6-v2's tokenizer.json: 160 texts with accents, CJK, Hangul,
// punctuation, controls, special tokens and over-long words.
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/model_dir.h"
#include "tokenizer/wordpiece_tokenizer.h"
#include "gtest/gtest.h"
#include "tests/util/python_runner.h"

namespace rill::tokenizer {
namespace {

std::string HexDecode(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

TEST(WordPieceParityTest, MatchesHfTokenizers) {
  const std::string json = base::DefaultEmbedModelPath() + "/tokenizer.json";
  ASSERT_TRUE(std::ifstream(json).good()) << json << " missing: run tools/setup.sh";
  const std::string out = std::string(std::getenv("TEST_TMPDIR")) + "/wordpiece_ref.tsv";
  absl::StatusOr<tests::util::CommandResult> r =
      tests::util::RunPython("tokenizer/testdata/wordpiece_reference.py", {json, out, "1"});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->output;

  absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> tok = WordPieceTokenizer::FromTokenizerJson(json);
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::ifstream in(out);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> parts = absl::StrSplit(line, '\t');
    ASSERT_EQ(parts.size(), 2u) << line;
    const std::string text = HexDecode(parts[0]);
    std::vector<int32_t> want;
    for (absl::string_view s : absl::StrSplit(parts[1], ' ', absl::SkipEmpty())) {
      int32_t id;
      ASSERT_TRUE(absl::SimpleAtoi(s, &id));
      want.push_back(id);
    }
    EXPECT_EQ((*tok)->Encode(text), want) << "text: " << text;
    ++n;
  }
  EXPECT_GE(n, 150);
}

TEST(WordPieceTest, SpecialsAndUnknowns) {
  absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> tok =
      WordPieceTokenizer::FromTokenizerJson(base::DefaultEmbedModelPath() + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<int32_t> empty = (*tok)->Encode("");
  EXPECT_EQ(empty, (std::vector<int32_t>{101, 102}));
  EXPECT_TRUE((*tok)->Encode("", /*add_special_tokens=*/false).empty());
  // A word past max_input_chars_per_word (100) is one [UNK].
  const std::vector<int32_t> long_word = (*tok)->Encode(std::string(101, 'a'), false);
  EXPECT_EQ(long_word, (std::vector<int32_t>{(*tok)->unk_id()}));
}

TEST(WordPieceTest, RejectsNonWordPieceJson) {
  absl::StatusOr<base::json::JsonValue> v =
      base::json::ParseJson(R"({"model":{"type":"BPE","vocab":{}}})");
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(WordPieceTokenizer::FromJson(*v).ok());
}

}  // namespace
}  // namespace rill::tokenizer
