#include "engine/service/local_engine_server.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/call_auth.h"
#include "engine/model_path.h"
#include "engine/tokenizer_loader.h"
#include "worker/loader/checkpoint.h"

namespace rill::engine::service {

std::shared_ptr<grpc::Channel> LocalEngineServer::NewChannel() const {
  return base::CreateChannelWithMetadata(absl::StrCat("127.0.0.1:", server->port()),
                                         grpc::InsecureChannelCredentials(), {},
                                         base::EngineCallMetadata(kEngineSecret, kAdminToken));
}

LocalEngineServer::~LocalEngineServer() {
  if (server != nullptr) server->Shutdown(absl::ZeroDuration());
}

absl::StatusOr<std::unique_ptr<LocalEngineServer>> StartLocalEngineServer(int64_t max_model_len) {
  HostOptions options;
  options.args.threads = 2;
  options.args.max_model_len = max_model_len;
  options.args.kv_cache_mb = 64;
  auto local = std::make_unique<LocalEngineServer>();
  local->host = std::make_unique<EngineHost>(options);
  local->server =
      std::make_unique<EngineServer>(local->host.get(), "127.0.0.1:0", ::testing::TempDir(),
                                     EngineAuth{LocalEngineServer::kEngineSecret,
                                                LocalEngineServer::kAdminToken});
  if (absl::Status s = local->server->Start(); !s.ok()) return s;
  local->host->StartLoading();
  if (absl::Status s = local->host->WaitLoaded(); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> checkpoint =
      worker::loader::LoadCheckpoint(engine::ResolveModelPath(options.args.model));
  if (!checkpoint.ok()) return checkpoint.status();
  absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> tok = engine::LoadTokenizer(**checkpoint);
  if (!tok.ok()) return tok.status();
  local->tokenizer = std::move(*tok);
  return local;
}

}  // namespace rill::engine::service
