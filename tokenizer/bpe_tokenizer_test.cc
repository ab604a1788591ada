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

}  // namespace
}  // namespace rill::tokenizer
