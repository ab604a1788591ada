#include "tokenizer/incremental_detokenizer.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include "tests/util/test_seed.h"
#include "tokenizer/test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_data.h"

namespace rill::tokenizer {
namespace {

void CheckStreams(const Tokenizer& tok, const std::vector<std::string>& texts) {
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(0));
  std::cout << "seed " << seed << std::endl;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> any(0, tok.vocab_size() - 1);
  for (int iter = 0; iter < 400; ++iter) {
    std::vector<int32_t> ids;
    if (iter % 2 == 0) {
      ids = tok.Encode(texts[iter / 2 % texts.size()]);
    } else {
      for (int k = rng() % 20; k >= 0; --k) ids.push_back(any(rng));
    }
    for (bool skip : {false, true}) {
      auto detok = tok.CreateDetokenizer(skip);
      std::string all;
      for (int32_t id : ids) {
        absl::StatusOr<std::string> d = detok->Push(id);
        ASSERT_TRUE(d.ok());
        EXPECT_TRUE(IsValidUtf8(*d)) << "seed " << seed;
        // Beyond a run of byte-fallback tokens, at most an incomplete character.
        EXPECT_LT(detok->pending_bytes() - detok->pending_run_bytes(), 4u);
        all += *d;
      }
      all += detok->Flush();
      EXPECT_EQ(all, *tok.Decode(ids, skip)) << "seed " << seed;
    }
  }
}

const std::vector<std::string> kTexts = {
    "Hello, world! 你好世界 👨‍👩‍👧‍👦 नमस्ते", " leading space and  two",
    "<|im_start|>user\nÄÖÜ ß 😀<|im_end|>", "мир 🏳️‍🌈 ١٢٣"};

TEST(IncrementalDetokenizerTest, DefaultModel) {
  const std::string model = testing::DefaultModelPath();
  if (model.empty()) GTEST_SKIP() << "default model not present";
  auto spec = testing::ReadGgufTokenizer(model);
  ASSERT_TRUE(spec.ok());
  auto tok = Tokenizer::FromSpec(*spec);
  ASSERT_TRUE(tok.ok());
  CheckStreams(**tok, kTexts);
  // A 4-byte emoji split over byte tokens is held back, then emitted whole.
  auto detok = (*tok)->CreateDetokenizer();
  std::string out;
  for (int32_t id : (*tok)->Encode("😀")) out += *detok->Push(id);
  EXPECT_EQ(out, "😀");
  EXPECT_FALSE(detok->Push(-1).ok());
}

TEST(IncrementalDetokenizerTest, SentencePieceLeadingSpace) {
  const std::string dir = testing::ReferenceDir();
  ASSERT_FALSE(dir.empty());
  auto tok = Tokenizer::FromTokenizerJson(dir + "/spm/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  CheckStreams(**tok, kTexts);
  auto detok = (*tok)->CreateDetokenizer(true);
  std::string out;
  for (int32_t id : (*tok)->Encode("hi there")) out += *detok->Push(id);
  EXPECT_EQ(out + detok->Flush(), "hi there");
}

}  // namespace
}  // namespace rill::tokenizer
