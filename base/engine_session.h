// Request-id scoping on the engine protocol (rill.internal.Engine). Each
// frontend names its engine session in the `rill-session` metadata of its
// Generate stream and of its unary calls (Abort, GetRequestStatus, Encode);
// the engine runs a request as "<session>/<id>" and answers with the bare
// id. So two frontends may use the same client request ids without
// colliding, and an Abort reaches only the frontend's own requests. Calls
// without the metadata share one engine-wide namespace (direct engine
// clients, tests).
#ifndef RILL_BASE_ENGINE_SESSION_H_
#define RILL_BASE_ENGINE_SESSION_H_

#include <cstdint>
#include <string>

namespace rill::base {

inline constexpr char kEngineSessionMetadata[] = "rill-session";

// The engine's id for `request_id` of `session` ("" = no session: unchanged;
// an empty id stays empty so the engine still rejects it).
inline std::string ScopedRequestId(const std::string& session, const std::string& request_id) {
  return session.empty() || request_id.empty() ? request_id : session + "/" + request_id;
}

// The id a frontend runs a client request under on its engine stream:
// "<client id>#<n>", n new for every start (EngineClient::NewEngineId), so a
// client may reuse an id as soon as its request finished while the engine
// may still be cleaning up the old one.
inline std::string EngineRequestId(const std::string& client_id, uint64_t n) {
  return client_id + "#" + std::to_string(n);
}

// The client id inside an EngineRequestId (everything before the last '#').
inline std::string ClientRequestIdOf(const std::string& engine_id) {
  size_t hash = engine_id.rfind('#');
  return hash == std::string::npos ? engine_id : engine_id.substr(0, hash);
}

}  // namespace rill::base

#endif  // RILL_BASE_ENGINE_SESSION_H_
