// Turns one request's engine outputs (token-id deltas) into client responses:
// each completion's text (tokenizer::CompletionText: incremental
// detokenization, stop strings with hold-back), logprob token texts, and the
// DELTA / CUMULATIVE / FINAL_ONLY output modes (tokenizer::OutputShaper).
#ifndef RILL_FRONTEND_COMPLETION_STREAM_H_
#define RILL_FRONTEND_COMPLETION_STREAM_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/completion_text.h"
#include "tokenizer/output_shaper.h"
#include "tokenizer/tokenizer.h"
#include "rill/internal/engine.pb.h"
#include "rill/v1/inference.pb.h"

namespace rill::frontend {

// Not thread-safe: one per request, fed in output order.
class CompletionStream {
 public:
  CompletionStream(const tokenizer::Tokenizer* tok,
                   const rill::v1::StartRequest& start, std::string request_id,
                   std::vector<int32_t> prompt_ids, std::string prompt_text);

  struct Result {
    std::optional<rill::v1::GenerateResponse> response;  // To send, if any.
    bool done = false;          // The request is finished for the client.
    bool abort_engine = false;  // Finished here (stop string) before the engine.
  };
  Result OnOutput(const rill::internal::EngineOutput& out);

  // Ends the request now (abort, cancel, error): the final response.
  rill::v1::GenerateResponse Finish(rill::v1::FinishReason reason, int code,
                                    const std::string& message);

  const std::string& request_id() const { return request_id_; }
  bool done() const { return done_; }

 private:
  struct Completion {
    std::unique_ptr<tokenizer::CompletionText> text;
    std::vector<int32_t> ids;
    std::vector<rill::v1::PositionLogprobs> logprobs;
    double cumulative_logprob = 0;
    bool finished = false;
    rill::v1::FinishReason reason = rill::v1::FINISH_REASON_UNSPECIFIED;
    std::optional<int32_t> stop_token_id;
  };

  // Appends one token; returns true when a stop string ended the completion.
  bool PushToken(Completion* c, int32_t id);
  // Ends the completion now with `reason` (no stop string).
  void End(Completion* c, rill::v1::FinishReason reason);
  void FillTokenText(rill::v1::PositionLogprobs* lp) const;
  rill::v1::GenerateResponse Build(bool final_response);

  const tokenizer::Tokenizer* tok_;
  const std::string request_id_;
  const bool want_logprobs_;
  std::vector<int32_t> prompt_ids_;
  std::string prompt_text_;
  std::vector<Completion> completions_;
  tokenizer::OutputShaper shaper_;
  bool first_sent_ = false;
  bool done_ = false;
  double arrival_time_;
  double first_token_time_ = 0;
  rill::v1::RequestMetrics engine_metrics_;
  bool have_engine_metrics_ = false;
  google::protobuf::RepeatedPtrField<rill::v1::PositionLogprobs> prompt_logprobs_;
};

double NowSeconds();

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_COMPLETION_STREAM_H_
