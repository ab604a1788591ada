// Test fixture for the whole service: rill-engine (and its workers) plus N
// rill-frontend processes on 127.0.0.1, started through the same
// ServerLauncher `rill serve` uses, and gRPC helpers to drive them.
#ifndef RILL_TESTS_INTEGRATION_SERVICE_STACK_H_
#define RILL_TESTS_INTEGRATION_SERVICE_STACK_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/tls_credentials.h"
#include "cli/server_launcher.h"
#include "rill/v1/inference.grpc.pb.h"

namespace rill::tests::integration {

struct StackOptions {
  int frontends = 1;
  int tensor_parallel_size = 1;
  std::vector<std::string> engine_flags;  // Beyond --model=default --threads=2.
  std::vector<std::string> frontend_flags;
  // Non-empty: rill.v1.Admin on the frontends and the engine (as `rill
  // serve --admin_token`).
  std::string admin_token;
  bool restart = true;
  // Credentials of NewChannel() (and of the start-up health wait): plaintext
  // unless set; for frontends started with --tls_cert (in frontend_flags).
  base::TlsFiles client_tls;
};

class ServiceStack {
 public:
  ~ServiceStack() { Stop(); }
  // Starts everything and waits until the frontends report SERVING.
  absl::Status Start(const StackOptions& options);
  void Stop();

  std::string address() const { return launcher_ ? launcher_->address() : ""; }
  std::string engine_address() const;
  // A channel with its own TCP connection (so several of them spread over
  // frontends sharing the port).
  std::shared_ptr<grpc::Channel> NewChannel(int tag = 0) const;
  // The same with other credentials (e.g. a client without a certificate).
  std::shared_ptr<grpc::Channel> NewChannel(int tag, const base::TlsFiles& tls) const;
  cli::ServerLauncher* launcher() { return launcher_.get(); }
  // The pid of child `name` ("engine", "frontend-0", ...), -1 if not running.
  int ChildPid(const std::string& name) const;
  const std::string& run_dir() const { return run_dir_; }

 private:
  std::unique_ptr<cli::ServerLauncher> launcher_;
  std::string run_dir_;
  base::TlsFiles client_tls_;
};

// Overall ("" service) or per-service health: SERVING / NOT_SERVING / error.
absl::StatusOr<bool> IsServing(const std::shared_ptr<grpc::Channel>& channel,
                               const std::string& service = "");
// Polls until IsServing == want or the timeout passes.
absl::Status WaitForHealth(const std::shared_ptr<grpc::Channel>& channel, bool want,
                           absl::Duration timeout, const std::string& service = "");

// What one finished request streamed back.
struct Collected {
  std::string request_id;
  std::string text;  // Concatenated deltas of completion 0.
  std::vector<int32_t> token_ids;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  v1::Status status;  // Per-request error, if any.
  int num_responses = 0;
  int num_finished = 0;  // Responses with finished = true (must be 1).
};

// Greedy text request (DELTA mode, ignore_eos).
v1::StartRequest GreedyText(const std::string& prompt, int max_tokens,
                            const std::string& request_id = "");

// Runs one request on its own Generate stream, half-closes, and collects it.
absl::StatusOr<Collected> GenerateOnce(v1::Inference::Stub* stub, const v1::StartRequest& start,
                                       absl::Duration timeout = absl::Seconds(300));

}  // namespace rill::tests::integration

#endif  // RILL_TESTS_INTEGRATION_SERVICE_STACK_H_
