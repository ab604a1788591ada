// One rill.internal.Engine/Generate stream (one per frontend): many requests
// multiplexed, a writer thread per stream so the engine loop only enqueues
// (never blocks on the network), per-request errors as EngineOutput.status,
// and every request started on the stream aborted when it breaks. Request
// ids are scoped by the stream's session (base/engine_session.h).
#ifndef RILL_ENGINE_SERVICE_GENERATE_STREAM_H_
#define RILL_ENGINE_SERVICE_GENERATE_STREAM_H_

#include <grpcpp/grpcpp.h>

#include "engine/service/engine_host.h"
#include "rill/internal/engine.grpc.pb.h"

namespace rill::engine::service {

// The caller's `rill-session` metadata (see base/engine_session.h), or "".
std::string SessionOf(const grpc::ServerContext& context);

// Serves the stream until the client half-closes (running requests finish
// first) or cancels (they are aborted). Runs on the gRPC handler thread.
grpc::Status ServeGenerateStream(
    EngineHost* host, grpc::ServerContext* context,
    grpc::ServerReaderWriter<rill::internal::EngineOutput, rill::internal::EngineRequest>* stream);

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_GENERATE_STREAM_H_
