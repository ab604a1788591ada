// One client Generate stream: parses and validates each message, starts and
// aborts requests on the shared engine stream, and writes their responses.
#ifndef RILL_FRONTEND_GENERATE_SESSION_H_
#define RILL_FRONTEND_GENERATE_SESSION_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "frontend/completion_stream.h"
#include "frontend/engine_client.h"
#include "rill/v1/inference.pb.h"

namespace rill::frontend {

using RawGenerateStream =
    grpc::ServerReaderWriter<rill::v1::GenerateResponse, grpc::ByteBuffer>;

// Builds the prompt token ids (and rendered text) of a start request.
absl::Status BuildPrompt(const tokenizer::Tokenizer& tok,
                         const rill::v1::StartRequest& start,
                         std::vector<int32_t>* ids, std::string* text);

class GenerateSession : public std::enable_shared_from_this<GenerateSession> {
 public:
  GenerateSession(EngineClient* engine, grpc::ServerContext* ctx,
                  RawGenerateStream* stream)
      : engine_(engine), ctx_(ctx), stream_(stream) {}

  // Runs the stream to its end; the handler's return value.
  grpc::Status Run();

 private:
  void HandleMessage(const std::string& bytes);
  void HandleStart(const rill::v1::StartRequest& start);
  void HandleAbort(const std::string& request_id);
  void OnEngineOutput(const std::string& id, const rill::internal::EngineOutput& out);
  void SendError(const std::string& id, const absl::Status& s);
  void Send(const rill::v1::GenerateResponse& resp);
  void AbortAll();

  EngineClient* const engine_;
  grpc::ServerContext* const ctx_;

  absl::Mutex mu_;
  absl::CondVar idle_cv_;
  absl::flat_hash_map<std::string, std::unique_ptr<CompletionStream>> active_
      ABSL_GUARDED_BY(mu_);
  bool saw_unavailable_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex write_mu_;
  RawGenerateStream* stream_ ABSL_GUARDED_BY(write_mu_);
};

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_GENERATE_SESSION_H_
