#include "worker/ipc/step_wire.h"

#include <gtest/gtest.h>

namespace rill::worker {
namespace {

TEST(StepWire, SequenceWithDeviceSamplingRoundTrips) {
  SequenceChunk in;
  in.tokens = {5, 6, 7};
  in.start_pos = 12;
  in.block_table = {3, 9};
  DeviceSampling d;
  d.temperature = 0.7f;
  d.top_k = 40;
  d.top_p = 0.9f;
  d.min_p = 0.05f;
  d.uniform = 0.123456789012345;
  d.descending_draw = true;
  d.top_logprobs = 3;
  d.edits = {{2, 1.2f, 0.5f, 0.0f, false}, {28, 1.0f, 0.0f, 2.0f, true}};
  in.device_sampling = d;
  rill::internal::StepSequence wire;
  SequenceToWire(in, &wire);
  rill::internal::StepSequence parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  const SequenceChunk out = SequenceFromWire(parsed);
  EXPECT_EQ(out.tokens, in.tokens);
  EXPECT_EQ(out.start_pos, 12);
  EXPECT_EQ(out.block_table, in.block_table);
  EXPECT_FALSE(out.all_logits);
  ASSERT_TRUE(out.device_sampling.has_value());
  const DeviceSampling& o = *out.device_sampling;
  EXPECT_EQ(o.temperature, 0.7f);
  EXPECT_EQ(o.top_k, 40);
  EXPECT_EQ(o.top_p, 0.9f);
  EXPECT_EQ(o.min_p, 0.05f);
  EXPECT_EQ(o.uniform, d.uniform);  // The draw crosses bit for bit.
  EXPECT_TRUE(o.descending_draw);
  EXPECT_EQ(o.top_logprobs, 3);
  ASSERT_EQ(o.edits.size(), 2u);
  EXPECT_EQ(o.edits[0].token, 2);
  EXPECT_EQ(o.edits[0].repetition, 1.2f);
  EXPECT_EQ(o.edits[0].subtract, 0.5f);
  EXPECT_EQ(o.edits[1].add, 2.0f);
  EXPECT_TRUE(o.edits[1].mask);
}

TEST(StepWire, SequenceWithoutDeviceSamplingStaysWithout) {
  SequenceChunk in;
  in.tokens = {1};
  in.all_logits = true;
  rill::internal::StepSequence wire;
  SequenceToWire(in, &wire);
  const SequenceChunk out = SequenceFromWire(wire);
  EXPECT_TRUE(out.all_logits);
  EXPECT_FALSE(out.device_sampling.has_value());
}

TEST(StepWire, SampledTokenRoundTrips) {
  DeviceSampledToken in;
  in.token = 42;
  in.logprob = -0.25f;
  in.top = {{42, -0.25f}, {7, -2.5f}};
  rill::internal::SampledToken wire;
  SampledToWire(in, &wire);
  const DeviceSampledToken out = SampledFromWire(wire);
  EXPECT_EQ(out.token, 42);
  EXPECT_EQ(out.logprob, -0.25f);
  EXPECT_EQ(out.top, in.top);
}

}  // namespace
}  // namespace rill::worker
