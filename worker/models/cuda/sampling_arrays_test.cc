#include "worker/models/cuda/sampling_arrays.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace rill::worker {
namespace {

SequenceChunk Seq(int tokens) {
  SequenceChunk s;
  s.tokens.assign(tokens, 1);
  return s;
}

DeviceSampling Spec(float temperature, double uniform, std::vector<LogitEdit> edits) {
  DeviceSampling d;
  d.temperature = temperature;
  d.min_p = 0.1f;
  d.uniform = uniform;
  d.edits = std::move(edits);
  return d;
}

TEST(SamplingArraysTest, PacksDeviceRowsAndLeavesHostRowsGreedy) {
  ForwardBatch b;
  b.sequences.push_back(Seq(1));  // host, one row
  b.sequences.push_back(Seq(3));  // host, all_logits: rows 1..3
  b.sequences.back().all_logits = true;
  b.sequences.push_back(Seq(1));  // device: row 4
  b.sequences.back().device_sampling = Spec(0.7f, 0.25, {{5, 1.2f, 0, 0, false}, {9, 1, 0, 0, true}});
  b.sequences.back().device_sampling->top_k = 40;
  b.sequences.back().device_sampling->descending_draw = true;
  b.sequences.back().device_sampling->top_logprobs = 2;
  b.sequences.push_back(Seq(2));  // device, greedy, no edits: row 5
  b.sequences.back().device_sampling = Spec(0.0f, 0.0, {});
  ASSERT_TRUE(ValidateDeviceSampling(b).ok());
  const SamplingArrays s = BuildSamplingArrays(b, {1, 3, 1, 1});
  EXPECT_EQ(s.num_device_rows, 2);
  ASSERT_EQ(s.params.size(), 6u);
  EXPECT_EQ(s.device_row, (std::vector<int32_t>{-1, -1, 4, 5}));
  EXPECT_EQ(s.host_row, (std::vector<bool>{true, true, true, true, false, false}));
  EXPECT_EQ(s.edit_offsets, (std::vector<int32_t>{0, 0, 0, 0, 0, 2, 2}));
  for (int r = 0; r < 4; ++r) EXPECT_EQ(s.params[r].temperature, 0.0f) << r;
  EXPECT_EQ(s.params[4].temperature, 0.7f);
  EXPECT_EQ(s.params[4].min_p, 0.1f);
  EXPECT_EQ(s.params[4].uniform, 0.25);
  EXPECT_EQ(s.params[4].top_k, 40);
  EXPECT_EQ(s.params[4].descending, 1);
  EXPECT_EQ(s.params[5].descending, 0);
  EXPECT_EQ(s.top_logprobs, (std::vector<int32_t>{0, 0, 0, 0, 2, 0}));
  EXPECT_EQ(s.max_top_logprobs, 2);
  EXPECT_EQ(s.edits[0].token, 5);
  EXPECT_EQ(s.edits[0].repetition, 1.2f);
  EXPECT_EQ(s.edits[1].mask, 1);

  // Top logprobs rows of kMaxTopLogprobs entries; row 4 reports its first two.
  std::vector<int32_t> top_ids(6 * kernels::cuda::kMaxTopLogprobs, -7);
  std::vector<float> top_lp(top_ids.size(), 0.0f);
  const size_t row4 = 4 * kernels::cuda::kMaxTopLogprobs;
  top_ids[row4] = 42;
  top_lp[row4] = -1.5f;
  top_ids[row4 + 1] = 11;
  top_lp[row4 + 1] = -2.0f;
  const std::vector<DeviceSampledToken> out =
      SampledTokens(s, {7, 7, 7, 7, 42, 3}, {0, 0, 0, 0, -1.5f, -0.25f}, top_ids, top_lp);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].token, -1);
  EXPECT_EQ(out[1].token, -1);
  EXPECT_EQ(out[2].token, 42);
  EXPECT_EQ(out[2].logprob, -1.5f);
  EXPECT_EQ(out[2].top, (std::vector<std::pair<int32_t, float>>{{42, -1.5f}, {11, -2.0f}}));
  EXPECT_EQ(out[3].token, 3);
  EXPECT_TRUE(out[3].top.empty());
}

TEST(SamplingArraysTest, NoDeviceRowsGivesNoSampledTokens) {
  ForwardBatch b;
  b.sequences.push_back(Seq(1));
  const SamplingArrays s = BuildSamplingArrays(b, {1});
  EXPECT_EQ(s.num_device_rows, 0);
  EXPECT_TRUE(SampledTokens(s, {0}, {0}).empty());
}

TEST(SamplingArraysTest, RejectsWhatTheGpuSamplerCannotHonour) {
  ForwardBatch b;
  b.sequences.push_back(Seq(2));
  b.sequences.back().device_sampling = Spec(1.0f, 0.5, {});
  b.sequences.back().all_logits = true;
  EXPECT_EQ(ValidateDeviceSampling(b).code(), absl::StatusCode::kInvalidArgument);
  b.sequences.back().all_logits = false;
  EXPECT_TRUE(ValidateDeviceSampling(b).ok());
  b.sequences.back().device_sampling->uniform = 1.0;
  EXPECT_EQ(ValidateDeviceSampling(b).code(), absl::StatusCode::kInvalidArgument);
  b.sequences.back().device_sampling->uniform = 0.5;
  b.sequences.back().device_sampling->top_p = 0.0f;
  EXPECT_EQ(ValidateDeviceSampling(b).code(), absl::StatusCode::kInvalidArgument);
  b.sequences.back().device_sampling->top_p = 1.0f;
  b.sequences.back().device_sampling->temperature = -1.0f;
  EXPECT_EQ(ValidateDeviceSampling(b).code(), absl::StatusCode::kInvalidArgument);
  b.sequences.back().device_sampling->temperature = 1.0f;
  b.sequences.back().device_sampling->top_logprobs = kernels::cuda::kMaxTopLogprobs + 1;
  EXPECT_EQ(ValidateDeviceSampling(b).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rill::worker
