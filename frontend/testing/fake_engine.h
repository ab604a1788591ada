// Test-only in-process rill.internal.Engine on 127.0.0.1: serves the real
// default model's TokenizerSpec and streams scripted token ids, with knobs to
// fail, delay and drop streams, and a record of starts and aborts under the
// client's request id (base::ClientRequestIdOf the engine id).
#ifndef RILL_FRONTEND_TESTING_FAKE_ENGINE_H_
#define RILL_FRONTEND_TESTING_FAKE_ENGINE_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "rill/internal/engine.grpc.pb.h"

namespace rill::frontend::testing {

// The default model's tokenizer as the engine would send it.
absl::StatusOr<rill::internal::TokenizerSpec> DefaultModelSpec();

class FakeEngine final : public rill::internal::Engine::Service {
 public:
  explicit FakeEngine(rill::internal::TokenizerSpec spec) : spec_(std::move(spec)) {}
  ~FakeEngine() override { Stop(); }

  // port 0 picks one; Restart() reuses the port of the first Start().
  absl::Status Start(int port = 0);
  void Stop();
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Knobs (set any time).
  void set_script(std::vector<int32_t> ids) { absl::MutexLock l(&mu_); script_ = std::move(ids); }
  void set_token_delay_ms(int ms) { token_delay_ms_ = ms; }
  // When > 0, start requests fail with this code.
  void set_fail_code(int code) { fail_code_ = code; }
  void set_healthy(bool h) { healthy_ = h; }
  // Breaks every open Generate stream.
  void DropStreams();

  // Record.
  std::vector<std::string> aborted() const;
  std::vector<rill::internal::EngineStart> started() const;
  bool WaitForAbort(const std::string& id, absl::Duration timeout) const;
  int open_streams() const { return open_streams_.load(); }

  grpc::Status Generate(grpc::ServerContext* ctx,
                        grpc::ServerReaderWriter<rill::internal::EngineOutput,
                                                 rill::internal::EngineRequest>* stream) override;
  grpc::Status Abort(grpc::ServerContext*, const rill::v1::AbortRequest* req,
                     rill::v1::AbortResponse*) override;
  grpc::Status GetRequestStatus(grpc::ServerContext*, const rill::v1::GetRequestStatusRequest* req,
                                rill::v1::GetRequestStatusResponse* resp) override;
  grpc::Status Encode(grpc::ServerContext*, const rill::internal::EngineEncodeRequest*,
                      rill::v1::EncodeResponse*) override;
  grpc::Status GetTokenizer(grpc::ServerContext*, const rill::internal::GetTokenizerRequest*,
                            rill::internal::TokenizerSpec* resp) override;
  grpc::Status GetModelConfig(grpc::ServerContext*, const rill::v1::GetModelConfigRequest*,
                              rill::v1::ModelConfig* resp) override;
  grpc::Status GetServerConfig(grpc::ServerContext*, const rill::v1::GetServerConfigRequest*,
                               rill::v1::ServerConfig* resp) override;
  grpc::Status GetLoad(grpc::ServerContext*, const rill::v1::GetLoadRequest*,
                       rill::v1::Load* resp) override;
  grpc::Status CheckHealth(grpc::ServerContext*, const rill::v1::CheckHealthRequest*,
                           rill::v1::CheckHealthResponse* resp) override;

 private:
  const rill::internal::TokenizerSpec spec_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::atomic<int> token_delay_ms_{0};
  std::atomic<int> fail_code_{0};
  std::atomic<bool> healthy_{true};
  std::atomic<int> open_streams_{0};
  std::atomic<uint64_t> drop_epoch_{0};

  mutable absl::Mutex mu_;
  std::vector<int32_t> script_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> aborted_ ABSL_GUARDED_BY(mu_);
  std::vector<rill::internal::EngineStart> started_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> running_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> abort_flags_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rill::frontend::testing

#endif  // RILL_FRONTEND_TESTING_FAKE_ENGINE_H_
