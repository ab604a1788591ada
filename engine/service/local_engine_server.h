// For gRPC tests of the engine service: the default model's EngineHost behind
// an EngineServer on 127.0.0.1 (a free port), loaded and serving.
#ifndef RILL_ENGINE_SERVICE_LOCAL_ENGINE_SERVER_H_
#define RILL_ENGINE_SERVICE_LOCAL_ENGINE_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "engine/service/engine_host.h"
#include "engine/service/engine_server.h"
#include "tokenizer/bpe_tokenizer.h"

namespace rill::engine::service {

struct LocalEngineServer {
  // The credentials it requires (EngineAuth): Admin is served.
  static constexpr char kEngineSecret[] = "local-engine-test-secret";
  static constexpr char kAdminToken[] = "local-engine-test-admin-token";

  std::unique_ptr<EngineHost> host;
  std::unique_ptr<EngineServer> server;  // Declared after host: destroyed first.
  // The model's tokenizer: the engine is token-only, so tests tokenize as a
  // frontend would.
  std::unique_ptr<tokenizer::BpeTokenizer> tokenizer;

  // A channel to it whose calls carry both credentials.
  std::shared_ptr<grpc::Channel> NewChannel() const;
  ~LocalEngineServer();
};

// 2 threads, a 64 MiB KV cache and `max_model_len`.
absl::StatusOr<std::unique_ptr<LocalEngineServer>> StartLocalEngineServer(int64_t max_model_len);

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_LOCAL_ENGINE_SERVER_H_
