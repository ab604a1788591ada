#include "tokenizer/output_shaper.h"

#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace rill::tokenizer {
namespace {

using Listing = OutputShaper::CumulativeListing;

TEST(OutputShaperTest, DeltaCarriesOnlyWhatWasNotSent) {
  OutputShaper shaper(OutputMode::kDelta, 1, Listing::kChanged);
  std::optional<CompletionSlice> a = shaper.Take(0, "He", 2);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->text, "He");
  EXPECT_EQ(a->token_begin, 0u);
  EXPECT_EQ(a->token_end, 2u);
  EXPECT_FALSE(a->finished);
  // A token whose text is held back still changes the completion.
  std::optional<CompletionSlice> b = shaper.Take(0, "He", 3);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->text, "");
  EXPECT_EQ(b->token_begin, 2u);
  EXPECT_EQ(b->token_end, 3u);
  // Nothing new: not listed.
  EXPECT_FALSE(shaper.Take(0, "He", 3).has_value());
  // The finish is reported once, with the released text.
  shaper.Finish(0);
  std::optional<CompletionSlice> c = shaper.Take(0, "Hey", 3);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->text, "y");
  EXPECT_EQ(c->token_begin, 3u);
  EXPECT_TRUE(c->finished);
  EXPECT_FALSE(shaper.Take(0, "Hey", 3).has_value());
}

TEST(OutputShaperTest, CumulativeCarriesEverythingAndListsAsAsked) {
  OutputShaper changed(OutputMode::kCumulative, 2, Listing::kChanged);
  OutputShaper every(OutputMode::kCumulative, 2, Listing::kEvery);
  for (OutputShaper* s : {&changed, &every}) {
    ASSERT_TRUE(s->Take(0, "ab", 2).has_value());
    ASSERT_TRUE(s->Take(1, "x", 1).has_value());
    std::optional<CompletionSlice> again = s->Take(0, "abc", 3);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->text, "abc");
    EXPECT_EQ(again->token_begin, 0u);
    EXPECT_EQ(again->token_end, 3u);
  }
  // Completion 1 did not change: only `every` lists it.
  EXPECT_FALSE(changed.Take(1, "x", 1).has_value());
  std::optional<CompletionSlice> listed = every.Take(1, "x", 1);
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->text, "x");
  EXPECT_EQ(listed->index, 1);
}

TEST(OutputShaperTest, FinalOnlyEmitsOnceEveryCompletionEnded) {
  OutputShaper shaper(OutputMode::kFinalOnly, 2, Listing::kChanged);
  EXPECT_FALSE(shaper.Emits());
  shaper.Finish(1);
  shaper.Finish(1);  // Twice counts once.
  EXPECT_FALSE(shaper.Emits());
  EXPECT_FALSE(shaper.all_finished());
  shaper.Finish(0);
  EXPECT_TRUE(shaper.all_finished());
  EXPECT_TRUE(shaper.Emits());
  for (int i = 0; i < 2; ++i) {
    std::optional<CompletionSlice> s = shaper.Take(i, "text", 4);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->text, "text");
    EXPECT_EQ(s->token_begin, 0u);
    EXPECT_TRUE(s->finished);
  }
}

TEST(OutputShaperTest, DeltaAndCumulativeAlwaysEmit) {
  EXPECT_TRUE(OutputShaper(OutputMode::kDelta, 1, Listing::kChanged).Emits());
  EXPECT_TRUE(OutputShaper(OutputMode::kCumulative, 3, Listing::kEvery).Emits());
  // n < 1 is one completion.
  EXPECT_EQ(OutputShaper(OutputMode::kDelta, 0, Listing::kChanged).size(), 1);
}

}  // namespace
}  // namespace rill::tokenizer
