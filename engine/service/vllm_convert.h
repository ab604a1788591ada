// Conversions between the gateway protocol (vllm.grpc.engine, from the pinned
// smg-grpc-proto wheel) and the token-only engine's types: sampling
// parameters in, logprobs and reports out. No I/O, no engine calls.
#ifndef RILL_ENGINE_SERVICE_VLLM_CONVERT_H_
#define RILL_ENGINE_SERVICE_VLLM_CONVERT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine_args.h"
#include "engine/engine_stats.h"
#include "engine/request_output.h"
#include "engine/sampling_params.h"
#include "vllm_engine.pb.h"

namespace rill::engine::service {

namespace vllm_pb = ::vllm::grpc::engine;

// The engine's parameters for one sample of `p` (params.n is the number of
// samples; the caller runs each as its own request with ForSample), the
// prompt already truncated. InvalidArgument with a short message for what
// the engine cannot do ("all" logprobs, json_object=false). The constraint
// oneof maps field for field onto SamplingParams::constraint; its syntax and
// size are left to the engine (InvalidArgument naming the constraint), as
// are value ranges to ValidateSamplingParams, whose messages name the field.
absl::StatusOr<engine::SamplingParams> FromVllmSampling(const vllm_pb::SamplingParams& p,
                                                        int64_t prompt_len,
                                                        int64_t max_model_len);

// The prompt the engine runs: the input ids, cut to their last
// truncate_prompt_tokens (-1: to max_model_len) when the field is set.
absl::StatusOr<std::vector<int32_t>> PromptOf(const vllm_pb::GenerateRequest& request,
                                              int64_t max_model_len);

// Appends the logprobs (and top alternatives) of `c`'s first `count`
// tokens.
void AppendOutputLogprobs(const engine::CompletionOutput& c, size_t count,
                          vllm_pb::OutputLogProbs* out);
// The prompt's logprobs: position 0 has none, then one per prompt token.
void FillInputLogprobs(const engine::RequestOutput& o, vllm_pb::InputLogProbs* out);

vllm_pb::SchedulerLoad ToSchedulerLoad(const engine::EngineStats& stats, int unfinished,
                                       const engine::EngineConfig& config);

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_VLLM_CONVERT_H_
