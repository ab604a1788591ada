#include "tokenizer/input_processor.h"

#include <memory>

#include <gtest/gtest.h>
#include "tokenizer/tiny_test_tokenizer.h"

namespace rill::tokenizer {
namespace {

class InputProcessorTest : public ::testing::Test {
 protected:
  // The tiny vocabulary has no chat template.
  std::unique_ptr<Tokenizer> tok_ = Tokenizer::FromBpe(TinyTestTokenizer());
  InputProcessor input_{tok_.get()};
};

TEST_F(InputProcessorTest, TextIsEncoded) {
  absl::StatusOr<ProcessedPrompt> p = input_.Process(PromptInput::Text("abc", false));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->token_ids, tok_->Encode("abc", false));
  EXPECT_EQ(p->token_ids.size(), 3u);
  EXPECT_EQ(p->text, "");
}

TEST_F(InputProcessorTest, TokenIdsAreCheckedAgainstTheVocabulary) {
  PromptInput in;
  in.kind = PromptInput::Kind::kTokenIds;
  in.token_ids = {1, 2, 3};
  absl::StatusOr<ProcessedPrompt> ok = input_.Process(in);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->token_ids, in.token_ids);

  in.token_ids = {1, tok_->vocab_size()};
  absl::StatusOr<ProcessedPrompt> bad = input_.Process(in);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("outside the vocabulary"), std::string::npos)
      << bad.status();
  in.token_ids = {-1};
  EXPECT_EQ(input_.Process(in).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(InputProcessorTest, ChatNeedsMessagesAndATemplate) {
  absl::StatusOr<ProcessedPrompt> empty = input_.Process(PromptInput::Chat({}));
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("chat.messages"), std::string::npos) << empty.status();

  absl::StatusOr<ProcessedPrompt> no_template =
      input_.Process(PromptInput::Chat({ChatMessage{"user", "hi"}}));
  EXPECT_EQ(no_template.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(no_template.status().message().find("chat template"), std::string::npos)
      << no_template.status();
}

}  // namespace
}  // namespace rill::tokenizer
