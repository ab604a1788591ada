// Checks client requests before they reach the engine (their bytes were
// parsed by base::ParseStrict, the policy every RPC shares).
#ifndef RILL_FRONTEND_REQUEST_VALIDATOR_H_
#define RILL_FRONTEND_REQUEST_VALIDATOR_H_

#include <string>

#include "absl/status/status.h"
#include "frontend/session_options.h"
#include "rill/v1/inference.pb.h"

namespace rill::frontend {


// Best-effort start.request_id / abort.request_id from raw GenerateRequest
// bytes (so errors name the request); empty when absent or invalid.
// `is_start`, if given: whether the id came from a start.
std::string PeekRequestId(const std::string& bytes, bool* is_start = nullptr);

// Sampling and prompt-shape checks that need no tokenizer.
absl::Status ValidateStart(const rill::v1::StartRequest& start,
                           const RequestLimits& limits = {});

// Writes the limits a request meets here into `decoding`, which holds the
// engine's own (0: none): the tighter of the two where both check one, so
// ServerConfig reports what is enforced.
void ReportLimits(const RequestLimits& limits, int64_t max_model_len,
                  rill::v1::ServerConfig::Decoding* decoding);

// After tokenization: the prompt must leave room in the context.
absl::Status ValidatePromptLength(size_t num_tokens, int64_t max_model_len,
                                  const RequestLimits& limits = {});

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_REQUEST_VALIDATOR_H_
