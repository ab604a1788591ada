#include "tokenizer/bpe_tokenizer.h"

#include <gtest/gtest.h>

namespace rill::tokenizer {
namespace {

// Only "<0xXX>" with two hex digits is a byte-fallback token; look-alikes
// ("<0x-1>" once indexed byte_ids_[-1]) are ordinary pieces.
TEST(BpeTokenizerTest, ByteTokensNeedTwoHexDigits) {
  TokenizerSpec spec;
  spec.model = "llama";
  spec.add_space_prefix = false;
  spec.tokens = {"<unk>", "<0x-1>", "<0x 1>", "<0x+f>", "<0x41>", "<0xe9>", "<0xG1>"};
  spec.unk_id = 0;
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tok = BpeTokenizer::Create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  for (int32_t id : {1, 2, 3, 6}) {
    absl::StatusOr<std::string> text = (*tok)->Decode({id}, false);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, spec.tokens[id]);
  }
  EXPECT_EQ(*(*tok)->Decode({4}, false), "A");
  EXPECT_EQ(*(*tok)->Decode({5}, false), "\xEF\xBF\xBD");  // Lone 0xE9 byte.
  // Byte fallback encodes through the real byte tokens only.
  EXPECT_EQ((*tok)->Encode("A", false), std::vector<int32_t>({4}));
  EXPECT_EQ((*tok)->Encode("\x01", false), std::vector<int32_t>({0}));
}

// Llama 3 (pre "llama-bpe"): a word that is a token is taken whole, even
// when the merges would not build it (HF ignore_merges); GPT-2 merges.
TEST(BpeTokenizerTest, Llama3IgnoresMergesForWholeWordTokens) {
  TokenizerSpec spec;
  spec.model = "gpt2";
  spec.tokens = {"a", "b", "c", "ab", "abc"};
  spec.merges = {"a b"};
  spec.pre = "llama-bpe";
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> llama3 = BpeTokenizer::Create(spec);
  ASSERT_TRUE(llama3.ok()) << llama3.status();
  EXPECT_EQ((*llama3)->Encode("abc", false), std::vector<int32_t>({4}));
  spec.pre = "gpt2";
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> gpt2 = BpeTokenizer::Create(spec);
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  EXPECT_EQ((*gpt2)->Encode("abc", false), std::vector<int32_t>({3, 2}));
}

// Gemma 4: spaces become U+2581 with no prefix, runs of newlines are words
// of their own (taken whole when they are a token), bytes fall back.
TEST(BpeTokenizerTest, Gemma4SplitsNewlineRuns) {
  TokenizerSpec spec;
  spec.model = "gemma4";
  spec.add_space_prefix = false;
  spec.tokens = {"<unk>", "\n", "\n\n", "a", "\xE2\x96\x81", "\xE2\x96\x81" "a", "a\n", "<0x7A>"};
  spec.merges = {"\xE2\x96\x81 a", "a \n"};
  spec.unk_id = 0;
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> tok = BpeTokenizer::Create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  // "a\n" never merges across the run boundary; "\n\n" is whole.
  EXPECT_EQ((*tok)->Encode("a\n\n az", false), std::vector<int32_t>({3, 2, 5, 7}));
  EXPECT_EQ(*(*tok)->Decode({3, 2, 5, 7}, false), "a\n\n az");
  spec.model = "bert";
  EXPECT_EQ(BpeTokenizer::Create(spec).status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace rill::tokenizer
