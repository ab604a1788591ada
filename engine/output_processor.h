// Turns EngineCoreOutputs into RequestOutputs: n > 1 sample groups, metrics,
// and delivery to each request's stream; the DELTA / CUMULATIVE / FINAL_ONLY
// shaping through tokenizer::OutputShaper (shared with the frontend), text and
// stop strings through an optional SampleText per sample (sample_text.h).
// Runs on the engine loop thread only.
#ifndef RILL_ENGINE_OUTPUT_PROCESSOR_H_
#define RILL_ENGINE_OUTPUT_PROCESSOR_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/engine_core.h"
#include "engine/engine_metrics.h"
#include "engine/output_stream.h"
#include "engine/request_output.h"
#include "engine/sample_text.h"
#include "tokenizer/output_shaper.h"

namespace rill::engine {

// The engine-core id of sample `index` of request `request_id` (n > 1); the
// request id itself when n == 1.
std::string SampleRequestId(const std::string& request_id, int index, int n);

struct ProcessResult {
  bool known = false;
  std::string request_id;       // The user's request (group) id.
  bool stop_matched = false;    // A stop string ended this sample just now.
  bool request_finished = false;  // All samples are finished.
  RequestState state = RequestState::kRunning;  // This sample's state after processing.
  // What to deliver, after the caller has updated the request's status (so
  // a reader of the final output sees the final status too).
  std::shared_ptr<RequestOutputStream> stream;
  std::optional<RequestOutput> output;
  void Deliver() {
    if (output.has_value()) stream->Push(std::move(*output));
    output.reset();
  }
};

class OutputProcessor {
 public:
  // `text` may be empty: outputs then carry token ids only.
  explicit OutputProcessor(SampleTextFactory text = nullptr) : text_(std::move(text)) {}
  // Every processed output is also counted there (null: not counted).
  void SetMetrics(EngineMetrics* metrics) { metrics_ = metrics; }

  // Registers a request with params.n samples (ids from SampleRequestId).
  void AddRequest(const std::string& request_id, std::string prompt,
                  std::vector<int32_t> prompt_token_ids, const SamplingParams& params,
                  absl::Time arrival, std::shared_ptr<RequestOutputStream> stream);

  // Folds a sample's output into its request and returns what to deliver
  // (see ProcessResult::Deliver). A finished request is forgotten.
  ProcessResult Process(const EngineCoreOutput& output);

  // Finishes every unfinished sample of the request with `state` without an
  // engine output (errors before admission, shutdown).
  void Finish(const std::string& request_id, RequestState state, const absl::Status& error);

  // Sample ids of an unfinished request (empty if unknown).
  std::vector<std::string> SampleIds(const std::string& request_id) const;
  // The request a sample id belongs to; "" if unknown.
  std::string RequestOf(const std::string& sample_id) const;

  int num_requests() const { return static_cast<int>(requests_.size()); }
  std::vector<std::string> RequestIds() const;

 private:
  struct Sample {
    std::unique_ptr<SampleText> text;  // Null without a text factory.
    CompletionOutput all;  // Cumulative view (text filled on output).
    absl::Time last_token = absl::InfinitePast();  // For inter-token latency.
  };
  struct State {
    std::string prompt;
    std::vector<int32_t> prompt_token_ids;
    SamplingParams params;
    std::shared_ptr<RequestOutputStream> stream;
    std::vector<Sample> samples;
    std::optional<tokenizer::OutputShaper> shaper;  // Which samples an output lists, and what of each.
    std::vector<float> prompt_logprobs;
    std::vector<TopLogprobs> prompt_top_logprobs;
    bool prompt_logprobs_sent = false;
    RequestMetrics metrics;
    absl::Status error;
  };

  // Appends the output's tokens and text to sample `index`; true on a
  // stop-string match.
  bool Update(State& s, int index, const EngineCoreOutput& o);
  static const std::string& TextOf(const Sample& sample);

  const SampleTextFactory text_;
  EngineMetrics* metrics_ = nullptr;
  absl::flat_hash_map<std::string, State> requests_;
  absl::flat_hash_map<std::string, std::pair<std::string, int>> sample_of_;  // Sample id -> (request, index).
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_OUTPUT_PROCESSOR_H_
