// Turns EngineCoreOutputs into RequestOutputs: incremental detokenization,
// DELTA / CUMULATIVE / FINAL_ONLY shaping, metrics, and delivery to each
// request's stream. Runs on the engine loop thread only.
#ifndef RILL_ENGINE_OUTPUT_PROCESSOR_H_
#define RILL_ENGINE_OUTPUT_PROCESSOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/engine_core.h"
#include "engine/output_stream.h"
#include "engine/request_output.h"
#include "frontend/tokenizer/bpe_tokenizer.h"
#include "frontend/tokenizer/incremental_detokenizer.h"

namespace rill::engine {

class OutputProcessor {
 public:
  // `tokenizer` may be null (then text stays empty); it must outlive this.
  explicit OutputProcessor(const tokenizer::BpeTokenizer* tokenizer) : tokenizer_(tokenizer) {}

  void AddRequest(const std::string& request_id, std::string prompt,
                  std::vector<int32_t> prompt_token_ids, const SamplingParams& params,
                  absl::Time arrival, std::shared_ptr<RequestOutputStream> stream);

  // Delivers the output to its stream; returns false for an unknown id. A
  // finished output also forgets the request.
  bool Process(const EngineCoreOutput& output);

  // Finishes the request with `state` without an engine output (errors
  // before admission, shutdown).
  void Finish(const std::string& request_id, RequestState state, const std::string& error);

  int num_requests() const { return static_cast<int>(requests_.size()); }
  std::vector<std::string> RequestIds() const;

 private:
  struct State {
    std::string prompt;
    std::vector<int32_t> prompt_token_ids;
    SamplingParams params;
    std::shared_ptr<RequestOutputStream> stream;
    std::unique_ptr<tokenizer::IncrementalDetokenizer> detokenizer;
    CompletionOutput all;  // Cumulative view.
    RequestMetrics metrics;
  };

  const tokenizer::BpeTokenizer* tokenizer_;
  absl::flat_hash_map<std::string, State> requests_;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_OUTPUT_PROCESSOR_H_
