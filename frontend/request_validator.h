// Checks client requests before they reach the engine. Raw bytes are walked
// against the message descriptor first, so bad UTF-8 in a string field and
// unknown fields become INVALID_ARGUMENT naming the field (protobuf's own
// parse would just fail and gRPC would answer INTERNAL).
#ifndef RILL_FRONTEND_REQUEST_VALIDATOR_H_
#define RILL_FRONTEND_REQUEST_VALIDATOR_H_

#include <string>

#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "frontend/session_options.h"
#include "rill/v1/inference.pb.h"

namespace rill::frontend {


// Parses `bytes` into `msg`, rejecting invalid UTF-8 in string fields and
// unknown fields (INVALID_ARGUMENT with the field path).
absl::Status ParseChecked(const std::string& bytes, google::protobuf::Message* msg);

// Best-effort start.request_id / abort.request_id from raw GenerateRequest
// bytes (so errors name the request); empty when absent or invalid.
// `is_start`, if given: whether the id came from a start.
std::string PeekRequestId(const std::string& bytes, bool* is_start = nullptr);

// Sampling and prompt-shape checks that need no tokenizer.
absl::Status ValidateStart(const rill::v1::StartRequest& start,
                           const RequestLimits& limits = {});

// After tokenization: the prompt must leave room in the context.
absl::Status ValidatePromptLength(size_t num_tokens, int64_t max_model_len,
                                  const RequestLimits& limits = {});

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_REQUEST_VALIDATOR_H_
