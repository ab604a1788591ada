#include <vector>

#include <gtest/gtest.h>

#include "engine/spec_decode/draft_length.h"
#include "engine/spec_decode/ngram_proposer.h"
#include "engine/spec_decode/spec_decode_config.h"

namespace rill::engine::spec_decode {
namespace {

using V = std::vector<int32_t>;

TEST(NgramProposerTest, ContinuesTheLatestOccurrenceOfTheLongestSuffix) {
  // Suffix (2, 3) occurs at 1 (followed by 9 9) and at 6 (followed by 7 8);
  // the 3-gram (1, 2, 3) only at 5.
  const V tokens = {1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3};
  EXPECT_EQ(ProposeNgramDraft(tokens, 1, 3, 2), (V{7, 8}));
  EXPECT_EQ(ProposeNgramDraft(tokens, 1, 3, 4), (V{7, 8, 5, 1}));
}

TEST(NgramProposerTest, FallsBackToShorterSuffixes) {
  const V tokens = {4, 5, 6, 7, 1, 6};  // (1, 6) never recurred; 6 did.
  EXPECT_EQ(ProposeNgramDraft(tokens, 1, 3, 3), (V{7, 1, 6}));
  EXPECT_TRUE(ProposeNgramDraft(tokens, 2, 3, 3).empty());
}

TEST(NgramProposerTest, PrefersAFullContinuationOverALaterShortOne) {
  // The suffix 5 occurs at 3 (followed by one token before the end) and
  // at 0 (followed by 6 7 5).
  const V tokens = {5, 6, 7, 5, 5};
  EXPECT_EQ(ProposeNgramDraft(tokens, 1, 3, 3), (V{6, 7, 5}));
  EXPECT_EQ(ProposeNgramDraft(tokens, 1, 3, 1), (V{5}));
}

TEST(NgramProposerTest, ReportsTheLengthOfTheMatchedSuffix) {
  const NgramDraft three = FindNgramDraft(V{1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3}, 1, 3, 2);
  EXPECT_EQ(three.tokens, (V{7, 8}));
  EXPECT_EQ(three.match_n, 3);
  const NgramDraft one = FindNgramDraft(V{4, 5, 6, 7, 1, 6}, 1, 3, 3);
  EXPECT_EQ(one.tokens, (V{7, 1, 6}));
  EXPECT_EQ(one.match_n, 1);
  const NgramDraft none = FindNgramDraft(V{1, 2, 3, 4}, 1, 3, 4);
  EXPECT_TRUE(none.tokens.empty());
  EXPECT_EQ(none.match_n, 0);
}

TEST(NgramProposerTest, PrefersTheOccurrenceWhoseMatchGoesFurthestBack) {
  // The suffix (2, 3) occurs at 1, after 7 (as the sequence's own tail: 7 2 3),
  // and later at 6 after 5. The earlier one is the source being copied.
  const V tokens = {7, 2, 3, 4, 4, 5, 2, 3, 6, 6, 7, 2, 3};
  const NgramDraft d = FindNgramDraft(tokens, 1, 2, 2);
  EXPECT_EQ(d.tokens, (V{4, 4}));
  EXPECT_EQ(d.match_n, 3);
  // Without the longer match, the latest occurrence wins.
  EXPECT_EQ(ProposeNgramDraft(V{8, 2, 3, 4, 4, 5, 2, 3, 6, 6, 7, 2, 3}, 1, 2, 2), (V{6, 6}));
}

TEST(NgramProposerTest, NothingWithoutRecurrenceOrBudget) {
  EXPECT_TRUE(ProposeNgramDraft(V{1, 2, 3, 4}, 1, 3, 4).empty());
  EXPECT_TRUE(ProposeNgramDraft(V{1, 1, 1}, 1, 3, 0).empty());
  EXPECT_TRUE(ProposeNgramDraft(V{}, 1, 3, 4).empty());
  EXPECT_TRUE(ProposeNgramDraft(V{7}, 1, 3, 4).empty());
}

// FindNgramDraft's draft after the rule's CapWeakMatch.
V ProposeNgramDraftCapped(const V& tokens, int min_n, int max_n, int k) {
  NgramDraft draft = FindNgramDraft(tokens, min_n, max_n, k);
  CapWeakMatch(max_n, &draft);
  return draft.tokens;
}

TEST(NgramProposerTest, AOneTokenMatchDraftsOneToken) {
  const V tokens = {4, 5, 6, 7, 1, 6};  // Only 6 recurred: 7 1 6 is a weak guess.
  EXPECT_EQ(ProposeNgramDraftCapped(tokens, 1, 3, 3), (V{7}));
  EXPECT_EQ(ProposeNgramDraftCapped(tokens, 1, 1, 3), (V{7, 1, 6}));  // Nothing longer looked up.
  const V two = {1, 2, 3, 9, 9, 1, 2};  // (1, 2) recurred.
  EXPECT_EQ(ProposeNgramDraftCapped(two, 1, 3, 3), (V{3, 9, 9}));
  EXPECT_TRUE(ProposeNgramDraftCapped(V{1, 2, 3}, 1, 3, 3).empty());
}

TEST(DraftLengthTest, GrowsOnFullAcceptanceAndShrinksOnRejection) {
  EXPECT_EQ(NextDraftLength(3, 3, 3, 8), 6);
  EXPECT_EQ(NextDraftLength(3, 3, 3, 5), 5);
  EXPECT_EQ(NextDraftLength(5, 5, 5, 5), 5);
  EXPECT_EQ(NextDraftLength(5, 5, 2, 5), 3);
  EXPECT_EQ(NextDraftLength(5, 5, 0, 5), 1);
  EXPECT_EQ(NextDraftLength(1, 1, 0, 5), 1);
}

TEST(SpecDecodeConfigTest, ValidatesEachOption) {
  SpecDecodeConfig c;
  EXPECT_TRUE(ValidateSpecDecodeConfig(c).ok());
  c.ngram_k = -1;
  EXPECT_FALSE(ValidateSpecDecodeConfig(c).ok());
  c = SpecDecodeConfig();
  c.ngram_min_n = 3;
  c.ngram_max_n = 2;
  EXPECT_FALSE(ValidateSpecDecodeConfig(c).ok());
  c = SpecDecodeConfig();
  c.disable_batch_size = 0;
  EXPECT_FALSE(ValidateSpecDecodeConfig(c).ok());
}

TEST(SpecDecodeStatsTest, CountsPerPosition) {
  SpecDecodeStats s;
  s.Record(3, 2);
  s.Record(4, 0);
  s.Record(2, 2);
  EXPECT_EQ(s.num_drafts, 3);
  EXPECT_EQ(s.num_draft_tokens, 9);
  EXPECT_EQ(s.num_accepted_tokens, 4);
  EXPECT_EQ(s.accepted_per_position, (std::vector<int64_t>{2, 2, 0, 0}));
}

}  // namespace
}  // namespace rill::engine::spec_decode
