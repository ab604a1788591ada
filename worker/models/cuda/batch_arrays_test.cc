#include "worker/models/cuda/batch_arrays.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace rill::worker {
namespace {

using ::testing::ElementsAre;

BatchLimits Limits() {
  BatchLimits l;
  l.vocab_size = 100;
  l.max_context = 64;
  l.num_blocks = 8;
  l.block_size = 16;
  l.max_batch_tokens = 8;
  return l;
}

SequenceChunk Chunk(std::vector<int32_t> tokens, int start, std::vector<int32_t> table,
                    bool all_logits = false) {
  SequenceChunk s;
  s.tokens = std::move(tokens);
  s.start_pos = start;
  s.block_table = std::move(table);
  s.all_logits = all_logits;
  return s;
}

// A prefill chunk, a decode token crossing into its second block, and a
// later prefill chunk of a sequence with cached context.
ForwardBatch Mixed(bool all_logits) {
  ForwardBatch b;
  b.sequences.push_back(Chunk({5, 6, 7}, 0, {3, 7}, all_logits));  // table longer than needed
  b.sequences.push_back(Chunk({9}, 17, {1, 4}));
  b.sequences.push_back(Chunk({11, 12}, 30, {2, 6}));
  return b;
}

TEST(BuildBatchArrays, RaggedBatchLayout) {
  const ForwardBatch b = Mixed(false);
  ASSERT_TRUE(ValidateBatch(b, Limits()).ok());
  const BatchArrays a = BuildBatchArrays(b, 16);
  EXPECT_EQ(a.num_tokens, 6);
  EXPECT_EQ(a.num_seqs, 3);
  EXPECT_THAT(a.tokens, ElementsAre(5, 6, 7, 9, 11, 12));
  EXPECT_THAT(a.positions, ElementsAre(0, 1, 2, 17, 30, 31));
  // block * 16 + offset: block 3 slots 48.., position 17 -> block 4 slot 1,
  // positions 30/31 -> block 6 slots 14/15.
  EXPECT_THAT(a.slot_mapping, ElementsAre(48, 49, 50, 65, 110, 111));
  EXPECT_THAT(a.query_start, ElementsAre(0, 3, 4, 6));
  EXPECT_THAT(a.context_lens, ElementsAre(3, 18, 32));
  EXPECT_EQ(a.max_context, 32);
  // Rows of 2 blocks; the first sequence needs one, padded with 0.
  EXPECT_EQ(a.max_blocks_per_seq, 2);
  EXPECT_THAT(a.block_tables, ElementsAre(3, 0, 1, 4, 2, 6));
  EXPECT_THAT(a.logit_rows, ElementsAre(2, 3, 5));
  EXPECT_THAT(a.logits_per_seq, ElementsAre(1, 1, 1));
}

TEST(BuildBatchArrays, AllLogitsReturnsEveryRowOfThatSequence) {
  const BatchArrays a = BuildBatchArrays(Mixed(true), 16);
  EXPECT_THAT(a.logit_rows, ElementsAre(0, 1, 2, 3, 5));
  EXPECT_THAT(a.logits_per_seq, ElementsAre(3, 1, 1));
}

TEST(BuildBatchArrays, SingleDecodeTokenHasOneBlockRow) {
  ForwardBatch b;
  b.sequences.push_back(Chunk({1}, 0, {5}));
  const BatchArrays a = BuildBatchArrays(b, 16);
  EXPECT_EQ(a.max_blocks_per_seq, 1);
  EXPECT_THAT(a.block_tables, ElementsAre(5));
  EXPECT_THAT(a.slot_mapping, ElementsAre(80));
}

absl::StatusCode CodeOf(ForwardBatch b) { return ValidateBatch(b, Limits()).code(); }

ForwardBatch One(SequenceChunk s) {
  ForwardBatch b;
  b.sequences.push_back(std::move(s));
  return b;
}

TEST(ValidateBatch, RejectsMalformedBatches) {
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(CodeOf(ForwardBatch{}), kBad);                        // no sequences
  EXPECT_EQ(CodeOf(One(Chunk({}, 0, {0}))), kBad);                // empty chunk
  EXPECT_EQ(CodeOf(One(Chunk({1}, -1, {0}))), kBad);              // negative start
  EXPECT_EQ(CodeOf(One(Chunk({100}, 0, {0}))), kBad);             // token == vocab
  EXPECT_EQ(CodeOf(One(Chunk({-1}, 0, {0}))), kBad);              // negative token
  EXPECT_EQ(CodeOf(One(Chunk({1, 2}, 15, {0}))), kBad);           // needs 2 blocks
  EXPECT_EQ(CodeOf(One(Chunk({1}, 0, {8}))), kBad);               // block == num_blocks
  EXPECT_EQ(CodeOf(One(Chunk({1}, 0, {-1}))), kBad);              // negative block
  EXPECT_EQ(CodeOf(One(Chunk({1}, 64, {0, 1, 2, 3, 4}))), kBad);  // position 64 >= context
  EXPECT_EQ(CodeOf(One(Chunk(std::vector<int32_t>(9, 1), 0, {0}))), kBad);  // > max tokens
  // The edges that are fine: last position, last block, last token id.
  EXPECT_TRUE(ValidateBatch(One(Chunk({99}, 63, {0, 1, 2, 7})), Limits()).ok());
  // A bad block past what the sequence needs is never read: accepted.
  EXPECT_TRUE(ValidateBatch(One(Chunk({1}, 0, {0, 99})), Limits()).ok());
}

TEST(ValidateBatch, ErrorNamesTheSequence) {
  ForwardBatch b = Mixed(false);
  b.sequences[2].tokens[1] = 1000;
  absl::Status s = ValidateBatch(b, Limits());
  EXPECT_NE(s.message().find("sequence 2"), absl::string_view::npos) << s;
}

TEST(DecodeGraph, OnlyOneTokenLastLogitsStepsReplay) {
  ForwardBatch b;
  b.sequences.push_back(Chunk({9}, 17, {1, 4}));
  b.sequences.push_back(Chunk({3}, 0, {5}));
  EXPECT_TRUE(IsDecodeOnly(b));
  EXPECT_FALSE(IsDecodeOnly(Mixed(false)));  // prefill chunks
  EXPECT_FALSE(IsDecodeOnly(ForwardBatch{}));
  ForwardBatch all = b;
  all.sequences[1].all_logits = true;  // prompt logprobs want every row
  EXPECT_FALSE(IsDecodeOnly(all));
  ForwardBatch hidden = b;
  hidden.sequences[0].return_hidden = true;
  EXPECT_FALSE(IsDecodeOnly(hidden));
}

TEST(DecodeGraph, PadsRowsIntoTheScratchBlock) {
  ForwardBatch b;
  b.sequences.push_back(Chunk({9}, 17, {1, 4}));  // second block, offset 1
  b.sequences.push_back(Chunk({3}, 0, {5}));
  const BatchArrays a = BuildBatchArrays(b, 16);
  ASSERT_EQ(a.max_blocks_per_seq, 2);
  const DecodeGraphArrays p = PadForDecodeGraph(a, /*bucket=*/4, /*table_width=*/3,
                                                /*scratch_block=*/8, /*block_size=*/16);
  EXPECT_THAT(p.tokens, ElementsAre(9, 3, 0, 0));
  EXPECT_THAT(p.positions, ElementsAre(17, 0, 0, 0));
  EXPECT_THAT(p.slot_mapping, ElementsAre(4 * 16 + 1, 5 * 16, 8 * 16, 8 * 16));
  EXPECT_THAT(p.context_lens, ElementsAre(18, 1, 1, 1));
  // Row s holds the step's table row, then the scratch block up to the width.
  EXPECT_THAT(p.block_tables, ElementsAre(1, 4, 8,  //
                                          5, 0, 8,  // BuildBatchArrays padded with block 0
                                          8, 8, 8,  //
                                          8, 8, 8));
}

}  // namespace
}  // namespace rill::worker
