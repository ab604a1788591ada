// One VllmEngine/Generate call: the request's n samples run as n engine
// requests (sample i with SamplingParams::ForSample(i), so a stop string can
// end one sample alone), their outputs become GenerateStreamChunk messages
// (stream = true) and exactly one GenerateComplete per sample index. Stop
// strings are matched on the detokenized samples (tokenizer::CompletionText,
// as the frontend does). A cancelled call or an Abort naming the request
// aborts every sample in the engine.
#ifndef RILL_ENGINE_SERVICE_VLLM_GENERATE_H_
#define RILL_ENGINE_SERVICE_VLLM_GENERATE_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "engine/service/engine_host.h"
#include "tokenizer/bpe_tokenizer.h"
#include "vllm_engine.grpc.pb.h"

namespace rill::engine::service {

// The engine request ids of the Generate calls in flight, by the caller's
// request id, so VllmEngine/Abort can end them. Thread-safe.
class LiveVllmRequests {
 public:
  // AlreadyExists if `request_id` is running.
  absl::Status Add(const std::string& request_id, std::vector<std::string> engine_ids);
  void Remove(const std::string& request_id);
  // The engine ids of `request_id` (empty if it is not running).
  std::vector<std::string> EngineIds(const std::string& request_id) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<std::string>> live_ ABSL_GUARDED_BY(mu_);
};

// Serves the call on the gRPC handler thread until every sample completed
// or the call ended. `tokenizer` may be null (then stop strings are
// refused).
grpc::Status ServeVllmGenerate(EngineHost* host, const tokenizer::BpeTokenizer* tokenizer,
                               LiveVllmRequests* live, grpc::ServerContext* context,
                               const ::vllm::grpc::engine::GenerateRequest& request,
                               grpc::ServerWriter<::vllm::grpc::engine::GenerateResponse>* writer);

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_VLLM_GENERATE_H_
