// The draft model's vocabulary check: sizes first, then the tokens when both
// checkpoints carry a tokenizer. (Loading a draft over real checkpoints:
// spec_decode_model_test.)
#include "engine/spec_decode/draft_model_loader.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tokenizer/tokenizer_spec.h"

namespace rill::engine::spec_decode {
namespace {

tokenizer::TokenizerSpec Spec(std::vector<std::string> tokens) {
  tokenizer::TokenizerSpec s;
  s.model = "gpt2";
  s.tokens = std::move(tokens);
  return s;
}

TEST(DraftModelLoaderTest, SameTokensPass) {
  EXPECT_TRUE(CheckDraftVocabulary("d.gguf", 3, 3, Spec({"a", "b", "c"}), Spec({"a", "b", "c"})).ok());
}

TEST(DraftModelLoaderTest, OtherSizeIsRefusedNamingBoth) {
  const absl::Status s = CheckDraftVocabulary("d.gguf", 3, 4, Spec({"a", "b", "c"}),
                                              Spec({"a", "b", "c", "d"}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "speculative_model d.gguf")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "4 tokens, the model's 3")) << s;
}

TEST(DraftModelLoaderTest, OtherTokensAreRefusedNamingTheFirst) {
  const absl::Status s =
      CheckDraftVocabulary("d.gguf", 3, 3, Spec({"a", "b", "c"}), Spec({"a", "x", "c"}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "token 1 is 'x' there, 'b' in the model")) << s;
}

TEST(DraftModelLoaderTest, OtherTokenizerModelIsRefused) {
  tokenizer::TokenizerSpec llama = Spec({"a", "b", "c"});
  llama.model = "llama";
  const absl::Status s = CheckDraftVocabulary("d.gguf", 3, 3, Spec({"a", "b", "c"}), llama);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "tokenizer differs")) << s;
}

// A checkpoint without tokenizer metadata (a converted or test model) is
// taken on its vocabulary size.
TEST(DraftModelLoaderTest, MissingTokenizerFallsBackToTheSize) {
  const absl::StatusOr<tokenizer::TokenizerSpec> none = absl::NotFoundError("no tokenizer");
  EXPECT_TRUE(CheckDraftVocabulary("d.gguf", 3, 3, Spec({"a", "b", "c"}), none).ok());
  EXPECT_FALSE(CheckDraftVocabulary("d.gguf", 3, 5, none, none).ok());
}

}  // namespace
}  // namespace rill::engine::spec_decode
