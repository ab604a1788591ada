// Credentials carried in gRPC call metadata, checked by the server and added
// by the client. The engine's port needs one on every call but health:
// rill.internal.Engine wants the deployment's engine secret
// (`rill-engine-secret: <secret>`), rill.v1.Admin (on frontends and engine)
// the admin token (`authorization: Bearer <token>`). Comparisons take the
// same time wherever the values differ.
#ifndef RILL_BASE_CALL_AUTH_H_
#define RILL_BASE_CALL_AUTH_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/string_view.h"

namespace rill::base {

inline constexpr char kEngineSecretMetadata[] = "rill-engine-secret";

// True when `got` == `want`; the time depends on want's length only.
bool SecretEquals(absl::string_view got, absl::string_view want);

// UNAUTHENTICATED (short message, never echoing what was sent) unless the
// call carries `rill-engine-secret: <secret>`.
grpc::Status CheckEngineSecret(const grpc::ServerContext& ctx, const std::string& secret);
// UNAUTHENTICATED unless the call carries `authorization: Bearer <token>`.
grpc::Status CheckAdminToken(const grpc::ServerContext& ctx, const std::string& token);

using CallMetadata = std::vector<std::pair<std::string, std::string>>;

// The metadata that authenticates a client to an engine: the secret and,
// when non-empty, the admin token (for rill.v1.Admin on the engine).
CallMetadata EngineCallMetadata(const std::string& engine_secret, const std::string& admin_token = "");

// grpc::CreateCustomChannel that adds `metadata` to every call on it (a
// client interceptor: call credentials are not sent over plaintext).
std::shared_ptr<grpc::Channel> CreateChannelWithMetadata(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args, CallMetadata metadata);

}  // namespace rill::base

#endif  // RILL_BASE_CALL_AUTH_H_
