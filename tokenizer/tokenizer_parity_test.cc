// Parity with the PyPI `tokenizers` library: the default model's tokenizer
// (rebuilt from its GGUF vocab/merges with SmolLM2's HF pipeline), a tiny
// GPT-2 style and a tiny Llama-2 style (byte fallback) tokenizer.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include "tokenizer/test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_data.h"

namespace rill::tokenizer {
namespace {

std::string Ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

// Checks encode.tsv exactly and decode(encode(s)) == s.
// Round trips are checked where the reference ids themselves round-trip
// (byte-level vocabs may lack some bytes, which HF drops), and counted.
void CheckEncodings(const Tokenizer& tok, const std::string& path,
                    bool roundtrip_skip_bos, size_t min_lines) {
  int roundtrips = 0;
  const auto lines = testing::ReadLines(path);
  ASSERT_GE(lines.size(), min_lines) << path;
  int failures = 0;
  for (const std::string& line : lines) {
    const auto cols = testing::SplitTabs(line);
    ASSERT_EQ(cols.size(), 2u);
    const std::string text = testing::HexDecode(cols[0]);
    const std::vector<int32_t> want = testing::ParseIds(cols[1]);
    const std::vector<int32_t> got = tok.Encode(text);
    if (got != want && ++failures <= 5) {
      ADD_FAILURE() << path << " text hex " << cols[0] << "\n got  "
                    << Ids(got) << "\n want " << Ids(want);
    }
    absl::StatusOr<std::string> back = tok.Decode(got, roundtrip_skip_bos);
    ASSERT_TRUE(back.ok()) << back.status();
    const bool lossless = text.find("<s>") == std::string::npos &&
                          text.find("</s>") == std::string::npos &&
                          *tok.Decode(want, roundtrip_skip_bos) == text;
    if (!lossless) continue;
    ++roundtrips;
    if (*back != text && ++failures <= 5) {
      ADD_FAILURE() << "roundtrip failed for hex " << cols[0];
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GE(roundtrips, static_cast<int>(lines.size() * 9 / 10));
}

void CheckDecodes(const Tokenizer& tok, const std::string& path) {
  const auto lines = testing::ReadLines(path);
  ASSERT_GE(lines.size(), 100u);
  for (const std::string& line : lines) {
    const auto cols = testing::SplitTabs(line);
    ASSERT_EQ(cols.size(), 3u);
    const std::vector<int32_t> ids = testing::ParseIds(cols[0]);
    EXPECT_EQ(*tok.Decode(ids, false), testing::HexDecode(cols[1])) << cols[0];
    EXPECT_EQ(*tok.Decode(ids, true), testing::HexDecode(cols[2])) << cols[0];
    // Streaming the same ids gives the same text, in valid UTF-8 pieces.
    for (const bool skip : {false, true}) {
      std::unique_ptr<IncrementalDetokenizer> detok = tok.CreateDetokenizer(skip);
      std::string streamed;
      for (int32_t id : ids) {
        absl::StatusOr<std::string> delta = detok->Push(id);
        ASSERT_TRUE(delta.ok()) << delta.status();
        EXPECT_TRUE(IsValidUtf8(*delta)) << cols[0];
        streamed += *delta;
      }
      streamed += detok->Flush();
      EXPECT_EQ(streamed, testing::HexDecode(cols[skip ? 2 : 1])) << cols[0] << " skip " << skip;
    }
  }
}

class ParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::ReferenceDir();
    ASSERT_FALSE(dir_.empty()) << "reference generation failed";
  }
  std::string dir_;
};

TEST_F(ParityTest, DefaultModelFromGguf) {
  const std::string model = testing::DefaultModelPath();
  if (model.empty()) GTEST_SKIP() << "default model not present";
  absl::StatusOr<TokenizerSpec> spec = testing::ReadGgufTokenizer(model);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->pre, "smollm");
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromSpec(*spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 49152);
  EXPECT_EQ((*tok)->eos_id(), 2);
  EXPECT_TRUE((*tok)->IsControl(2));
  CheckEncodings(**tok, dir_ + "/smollm/encode.tsv", false, 2000);
  CheckDecodes(**tok, dir_ + "/smollm/decode.tsv");

  // The GGUF's template is SmolLM2's ChatML with a default system prompt.
  const std::vector<ChatMessage> msgs = {{"user", "Hi"}};
  absl::StatusOr<std::string> prompt = (*tok)->ApplyChatTemplate(msgs, true);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_EQ(*prompt,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
            "trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>"
            "\n<|im_start|>assistant\n");
  const std::vector<int32_t> ids = (*tok)->Encode(*prompt);
  EXPECT_EQ(ids[0], 1);  // <|im_start|> matched literally, not split.
  EXPECT_EQ((*tok)->Encode("<|im_end|>", true, /*parse_special=*/false).size() > 1,
            true);
}

TEST_F(ParityTest, DefaultModelFromTokenizerJson) {
  if (testing::DefaultModelPath().empty()) GTEST_SKIP() << "no model";
  auto tok = Tokenizer::FromTokenizerJson(dir_ + "/smollm/tokenizer.json",
                                          dir_ + "/smollm/tokenizer_config.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->bpe().spec().pre, "smollm");
  EXPECT_EQ((*tok)->eos_id(), 2);
  CheckEncodings(**tok, dir_ + "/smollm/encode.tsv", false, 2000);
  CheckDecodes(**tok, dir_ + "/smollm/decode.tsv");
  EXPECT_TRUE((*tok)->ApplyChatTemplate({{"user", "x"}}, false).ok());
}

TEST_F(ParityTest, TinyGpt2) {
  auto tok = Tokenizer::FromTokenizerJson(dir_ + "/gpt2/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->bpe().spec().pre, "gpt2");
  CheckEncodings(**tok, dir_ + "/gpt2/encode.tsv", false, 1000);
  CheckDecodes(**tok, dir_ + "/gpt2/decode.tsv");
  // No chat template: an explicit error, not a guessed prompt.
  EXPECT_EQ((*tok)->ApplyChatTemplate({{"user", "x"}}, true).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST_F(ParityTest, TinySentencePieceByteFallback) {
  auto tok = Tokenizer::FromTokenizerJson(dir_ + "/spm/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->bpe().spec().model, "llama");
  EXPECT_TRUE((*tok)->bpe().spec().add_bos);
  EXPECT_EQ((*tok)->bos_id(), 1);
  // Round trip skips the BOS that Encode adds.
  CheckEncodings(**tok, dir_ + "/spm/encode.tsv", true, 1000);
  CheckDecodes(**tok, dir_ + "/spm/decode.tsv");
}

TEST(SentencePieceScoreTest, MergesByScoreWithByteFallback) {
  // llama.cpp-style: no merges, highest-scoring concatenation first.
  TokenizerSpec spec;
  spec.model = "llama";
  spec.tokens = {"<unk>", "<s>", "</s>"};
  spec.token_types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    snprintf(buf, sizeof(buf), "<0x%02X>", b);
    spec.tokens.push_back(buf);
    spec.token_types.push_back(6);
  }
  const std::vector<std::pair<std::string, float>> pieces = {
      {"\xE2\x96\x81", -1}, {"a", -1}, {"b", -1}, {"c", -1},
      {"ab", -2}, {"bc", -0.5}, {"\xE2\x96\x81" "a", -3},
      {"\xE2\x96\x81" "abc", -0.1}};
  spec.scores.assign(spec.tokens.size(), 0);
  for (const auto& [t, s] : pieces) {
    spec.tokens.push_back(t);
    spec.token_types.push_back(1);
    spec.scores.push_back(s);
  }
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.unk_id = 0;
  spec.add_bos = true;
  auto tok = Tokenizer::FromSpec(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto id = [&](const std::string& t) { return *(*tok)->TokenToId(t); };
  // "abc": bc (-0.5) first, then ▁a (-3), then ▁a+bc = ▁abc (-0.1).
  EXPECT_EQ((*tok)->Encode("abc"),
            (std::vector<int32_t>{1, id("\xE2\x96\x81" "abc")}));
  // "ab": ab (-2) beats ▁a (-3) and "▁ab" is not a token.
  EXPECT_EQ((*tok)->Encode("ab"),
            (std::vector<int32_t>{1, id("\xE2\x96\x81"), id("ab")}));
  // 'é' is not in the vocab: byte fallback to <0xC3><0xA9>.
  EXPECT_EQ((*tok)->Encode("\xC3\xA9", false),
            (std::vector<int32_t>{id("\xE2\x96\x81"), 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(*(*tok)->Decode((*tok)->Encode("abc a\xC3\xA9"), true),
            "abc a\xC3\xA9");
}

}  // namespace
}  // namespace rill::tokenizer
