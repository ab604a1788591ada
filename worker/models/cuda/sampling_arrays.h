// Host side of sampling on the GPU: the per-logit-row arrays that
// kernels/cuda ApplyLogitEdits, Sample and Logprobs read for a step whose
// sequences carry SequenceChunk::device_sampling, and the mapping of their
// results back to ForwardOutput::sampled. No CUDA here (tested anywhere).
#ifndef RILL_WORKER_MODELS_CUDA_SAMPLING_ARRAYS_H_
#define RILL_WORKER_MODELS_CUDA_SAMPLING_ARRAYS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cuda/cuda_kernels.h"
#include "worker/forward_batch.h"

namespace rill::worker {

// InvalidArgument for device_sampling that the GPU sampler cannot honour:
// with all_logits (its logits are returned), or a non-finite or negative
// temperature, top_p outside (0, 1], min_p outside [0, 1], a uniform outside
// [0, 1), top_logprobs outside [0, kMaxTopLogprobs].
absl::Status ValidateDeviceSampling(const ForwardBatch& batch);

// Indexed by logit row (BatchArrays::logit_rows order: each sequence's
// logits_per_seq rows in turn). A row without device_sampling is greedy with
// no edits: the kernels still run over it (one launch per chunk of rows) and
// its result is ignored; its logits go back to the host unchanged.
struct SamplingArrays {
  int num_device_rows = 0;  // 0: no sequence samples on the device
  std::vector<::rill::kernels::cuda::SamplingParams> params;  // [rows]
  std::vector<int32_t> edit_offsets;                          // [rows + 1] into edits
  std::vector<::rill::kernels::cuda::LogitEdit> edits;
  std::vector<int32_t> top_logprobs;  // [rows]: how many best tokens to report (0: none)
  int max_top_logprobs = 0;           // their largest: 0 skips the TopLogprobs kernel
  // Per logit row: whether the host gets its logits (not sampled on the device).
  std::vector<bool> host_row;
  // Per sequence: its logit row when it samples on the device, else -1.
  std::vector<int32_t> device_row;
};

// The kernels' SamplingParams of one device row.
::rill::kernels::cuda::SamplingParams KernelParams(const DeviceSampling& d);

// `logits_per_seq` as BuildBatchArrays made it. Call after ValidateBatch and
// ValidateDeviceSampling succeeded.
SamplingArrays BuildSamplingArrays(const ForwardBatch& batch,
                                   const std::vector<int32_t>& logits_per_seq);

// ForwardOutput::sampled from the kernels' per-row tokens and logprobs
// (token -1 for sequences without device_sampling) and, when
// max_top_logprobs > 0, the TopLogprobs rows ([rows][kMaxTopLogprobs]);
// empty when no sequence had device_sampling.
std::vector<DeviceSampledToken> SampledTokens(const SamplingArrays& s,
                                              const std::vector<int32_t>& row_tokens,
                                              const std::vector<float>& row_logprobs,
                                              const std::vector<int32_t>& top_ids = {},
                                              const std::vector<float>& top_logprobs = {});

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_CUDA_SAMPLING_ARRAYS_H_
