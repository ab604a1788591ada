#include "engine/output_processor.h"

#include <glog/logging.h>

namespace rill::engine {

void OutputProcessor::AddRequest(const std::string& request_id, std::string prompt,
                                 std::vector<int32_t> prompt_token_ids,
                                 const SamplingParams& params, absl::Time arrival,
                                 std::shared_ptr<RequestOutputStream> stream) {
  State& s = requests_[request_id];
  s.prompt = std::move(prompt);
  s.prompt_token_ids = std::move(prompt_token_ids);
  s.params = params;
  s.stream = std::move(stream);
  s.metrics.arrival_time = arrival;
  if (tokenizer_ != nullptr) {
    s.detokenizer = std::make_unique<tokenizer::IncrementalDetokenizer>(tokenizer_,
                                                                        params.skip_special_tokens);
  }
}

std::vector<std::string> OutputProcessor::RequestIds() const {
  std::vector<std::string> ids;
  for (const auto& [id, s] : requests_) ids.push_back(id);
  return ids;
}

bool OutputProcessor::Process(const EngineCoreOutput& o) {
  auto it = requests_.find(o.request_id);
  if (it == requests_.end()) return false;
  State& s = it->second;
  CompletionOutput delta;
  for (size_t i = 0; i < o.new_token_ids.size(); ++i) {
    const int32_t t = o.new_token_ids[i];
    delta.token_ids.push_back(t);
    if (i < o.new_logprobs.size()) {
      delta.logprobs.push_back(o.new_logprobs[i]);
      s.all.cumulative_logprob += o.new_logprobs[i];
    }
    if (i < o.new_top_logprobs.size()) delta.top_logprobs.push_back(o.new_top_logprobs[i]);
    if (s.detokenizer != nullptr) {
      absl::StatusOr<std::string> text = s.detokenizer->Push(t);
      if (text.ok()) {
        delta.text += *text;
      } else {
        LOG(WARNING) << "request " << o.request_id << ": " << text.status();
      }
    }
  }
  const bool finished = o.finished();
  if (finished && s.detokenizer != nullptr) delta.text += s.detokenizer->Flush();
  s.all.text += delta.text;
  s.all.token_ids.insert(s.all.token_ids.end(), delta.token_ids.begin(), delta.token_ids.end());
  s.all.logprobs.insert(s.all.logprobs.end(), delta.logprobs.begin(), delta.logprobs.end());
  s.all.top_logprobs.insert(s.all.top_logprobs.end(), delta.top_logprobs.begin(),
                            delta.top_logprobs.end());
  s.all.finish_reason = FinishReason(o.state);
  s.all.stop_reason = o.stop_reason;
  s.metrics.first_scheduled_time = o.times.first_scheduled;
  s.metrics.first_token_time = o.times.first_token;
  s.metrics.last_token_time = o.times.last_token;
  s.metrics.finished_time = o.times.finished;
  s.metrics.num_cached_tokens = o.num_cached_tokens;
  s.metrics.num_preemptions = o.num_preemptions;

  const OutputKind kind = s.params.output_kind;
  if (kind == OutputKind::kFinalOnly && !finished) return true;
  RequestOutput out;
  out.request_id = o.request_id;
  out.prompt = s.prompt;
  out.prompt_token_ids = s.prompt_token_ids;
  out.finished = finished;
  out.error = o.error;
  out.metrics = s.metrics;
  if (kind == OutputKind::kDelta) {
    delta.cumulative_logprob = s.all.cumulative_logprob;
    delta.finish_reason = s.all.finish_reason;
    delta.stop_reason = s.all.stop_reason;
    out.outputs.push_back(std::move(delta));
  } else {
    out.outputs.push_back(s.all);
  }
  std::shared_ptr<RequestOutputStream> stream = s.stream;
  if (finished) requests_.erase(it);
  stream->Push(std::move(out));
  return true;
}

void OutputProcessor::Finish(const std::string& request_id, RequestState state,
                             const std::string& error) {
  EngineCoreOutput o;
  o.request_id = request_id;
  o.state = state;
  o.error = error;
  o.times.finished = absl::Now();
  Process(o);
}

}  // namespace rill::engine
