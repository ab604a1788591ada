// Conversions between the wire messages (rill.v1, rill.internal) and the
// engine's C++ types. Pure functions: no gRPC, no engine instance.
#ifndef RILL_ENGINE_SERVICE_PROTO_CONVERT_H_
#define RILL_ENGINE_SERVICE_PROTO_CONVERT_H_

#include "absl/status/statusor.h"
#include "engine/async_engine.h"
#include "engine/request_output.h"
#include "engine/sampling_params.h"
#include "engine/structured_output/constraint.h"
#include "tokenizer/tokenizer_spec.h"
#include "rill/internal/engine.pb.h"
#include "rill/v1/admin.pb.h"
#include "rill/v1/inference.pb.h"

namespace rill::engine::service {

// InvalidArgument naming the field for what the engine cannot do (n > 1,
// prompt_logprobs, logit_bias). Stop strings are the frontend's and ignored.
// The result is always DELTA output.
absl::StatusOr<engine::SamplingParams> FromProto(const rill::v1::SamplingParams& proto);
rill::v1::SamplingParams ToProto(const engine::SamplingParams& params);
// The `constraint` oneof (kNone when unset); json_object = false is refused.
absl::StatusOr<structured_output::Constraint> ConstraintFromProto(const rill::v1::SamplingParams& proto);
void ConstraintToProto(const structured_output::Constraint& constraint, rill::v1::SamplingParams* proto);

// One engine output (DELTA kind) as an EngineOutput; metrics only when finished.
rill::internal::EngineOutput ToEngineOutput(const engine::RequestOutput& output);
rill::v1::FinishReason FinishReasonFromString(const std::string& reason);
rill::v1::RequestState ToProto(engine::RequestStatus status);

// normalize defaults to true when unset.
engine::PoolingParams FromProto(const rill::v1::PoolingParams& proto);

// `supports_embeddings`: whether Encode runs on this model (engine SupportsEncode).
rill::v1::ModelConfig ToModelConfig(const std::string& model_name,
                                    const engine::EngineConfig& config, bool has_chat_template,
                                    bool supports_embeddings);
rill::v1::ServerConfig ToServerConfig(const engine::EngineConfig& config,
                                      int max_waiting_requests);
rill::v1::Load ToLoad(const engine::EngineStats& stats, int num_unfinished);
rill::v1::Stats ToStats(const engine::EngineStats& stats);

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_PROTO_CONVERT_H_
