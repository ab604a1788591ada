#include "engine/output_processor.h"

#include <algorithm>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"

namespace rill::engine {
namespace {

tokenizer::OutputMode ModeOf(OutputKind kind) {
  switch (kind) {
    case OutputKind::kDelta:
      return tokenizer::OutputMode::kDelta;
    case OutputKind::kFinalOnly:
      return tokenizer::OutputMode::kFinalOnly;
    case OutputKind::kCumulative:
      break;
  }
  return tokenizer::OutputMode::kCumulative;
}

// The part of a sample's cumulative view that `slice` names.
CompletionOutput SliceOf(const CompletionOutput& all, tokenizer::CompletionSlice slice) {
  CompletionOutput c;
  c.index = slice.index;
  c.text = std::move(slice.text);
  c.token_ids.assign(all.token_ids.begin() + slice.token_begin,
                     all.token_ids.begin() + slice.token_end);
  c.logprobs.assign(all.logprobs.begin() + std::min(slice.token_begin, all.logprobs.size()),
                    all.logprobs.end());
  c.top_logprobs.assign(
      all.top_logprobs.begin() + std::min(slice.token_begin, all.top_logprobs.size()),
      all.top_logprobs.end());
  c.cumulative_logprob = all.cumulative_logprob;
  c.finish_reason = all.finish_reason;
  c.stop_reason = all.stop_reason;
  c.stop_string = all.stop_string;
  return c;
}

}  // namespace

std::string SampleRequestId(const std::string& request_id, int index, int n) {
  // \x1f (unit separator) keeps sample ids apart from ordinary request ids.
  return n == 1 ? request_id : absl::StrCat(request_id, "\x1f", index);
}

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
  s.samples.resize(std::max(1, params.n));
  // The in-process API lists every sample in CUMULATIVE outputs (vLLM's RequestOutput).
  s.shaper.emplace(ModeOf(params.output_kind), params.n,
                   tokenizer::OutputShaper::CumulativeListing::kEvery);
  for (int i = 0; i < static_cast<int>(s.samples.size()); ++i) {
    Sample& sample = s.samples[i];
    sample.all.index = i;
    if (text_) sample.text = text_(params);
    sample_of_[SampleRequestId(request_id, i, params.n)] = {request_id, i};
  }
}

std::vector<std::string> OutputProcessor::RequestIds() const {
  std::vector<std::string> ids;
  for (const auto& [id, s] : requests_) ids.push_back(id);
  return ids;
}

std::vector<std::string> OutputProcessor::SampleIds(const std::string& request_id) const {
  std::vector<std::string> ids;
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return ids;
  for (int i = 0; i < static_cast<int>(it->second.samples.size()); ++i) {
    if (!it->second.shaper->finished(i)) {
      ids.push_back(SampleRequestId(request_id, i, it->second.params.n));
    }
  }
  return ids;
}

std::string OutputProcessor::RequestOf(const std::string& sample_id) const {
  auto it = sample_of_.find(sample_id);
  return it == sample_of_.end() ? "" : it->second.first;
}

bool OutputProcessor::Update(State& s, int index, const EngineCoreOutput& o) {
  Sample& sample = s.samples[index];
  CompletionOutput& all = sample.all;
  bool matched = false;
  for (size_t i = 0; i < o.new_token_ids.size() && !matched; ++i) {
    const int32_t t = o.new_token_ids[i];
    all.token_ids.push_back(t);
    if (i < o.new_logprobs.size()) {
      all.logprobs.push_back(o.new_logprobs[i]);
      all.cumulative_logprob += o.new_logprobs[i];
    }
    if (i < o.new_top_logprobs.size()) all.top_logprobs.push_back(o.new_top_logprobs[i]);
    if (sample.text != nullptr) matched = sample.text->Push(t);
  }
  all.finish_reason = FinishReason(o.state);
  all.stop_reason = o.stop_reason;
  if (matched) {
    all.finish_reason = "stop";
    all.stop_reason.reset();
    all.stop_string = sample.text->stop_string();
  } else if (o.finished() && sample.text != nullptr) {
    sample.text->Finish();
  }
  if (matched || o.finished()) s.shaper->Finish(index);
  // The core finished the sample itself in this very output: nothing to end.
  return matched && !o.finished();
}

const std::string& OutputProcessor::TextOf(const Sample& sample) {
  static const std::string* const kEmpty = new std::string();
  return sample.text != nullptr ? sample.text->text() : *kEmpty;
}

ProcessResult OutputProcessor::Process(const EngineCoreOutput& o) {
  ProcessResult result;
  auto sit = sample_of_.find(o.request_id);
  if (sit == sample_of_.end()) return result;
  const std::string request_id = sit->second.first;
  const int index = sit->second.second;
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return result;
  State& s = it->second;
  tokenizer::OutputShaper& shaper = *s.shaper;
  result.known = true;
  result.request_id = request_id;
  Sample& sample = s.samples[index];
  if (shaper.finished(index)) return result;  // E.g. an abort racing a stop-string match.
  const int64_t tokens_before = static_cast<int64_t>(sample.all.token_ids.size());
  result.stop_matched = Update(s, index, o);
  result.state = result.stop_matched ? RequestState::kFinishedStopped : o.state;
  if (metrics_ != nullptr) {
    metrics_->OnSampleOutput(o, result.state, static_cast<int64_t>(s.prompt_token_ids.size()),
                             tokens_before, sample.last_token);
  }
  if (!o.new_token_ids.empty()) sample.last_token = o.times.last_token;
  if (shaper.finished(index)) sample_of_.erase(sit);
  if (!o.prompt_logprobs.empty() && s.prompt_logprobs.empty()) {
    s.prompt_logprobs = o.prompt_logprobs;
    s.prompt_top_logprobs = o.prompt_top_logprobs;
  }
  if (!o.error.ok()) s.error = o.error;
  RequestMetrics& m = s.metrics;
  if (m.first_scheduled_time == absl::InfinitePast()) m.first_scheduled_time = o.times.first_scheduled;
  if (m.first_token_time == absl::InfinitePast()) m.first_token_time = o.times.first_token;
  m.last_token_time = std::max(m.last_token_time, o.times.last_token);
  m.finished_time = std::max(m.finished_time, o.times.finished);
  m.num_cached_tokens = std::max(m.num_cached_tokens, o.num_cached_tokens);
  m.num_preemptions = std::max(m.num_preemptions, o.num_preemptions);

  const bool finished = shaper.all_finished();
  result.request_finished = finished;
  if (finished && metrics_ != nullptr) metrics_->OnRequestFinished(result.state);
  if (!shaper.Emits()) return result;
  RequestOutput out;
  out.request_id = request_id;
  out.prompt = s.prompt;
  out.prompt_token_ids = s.prompt_token_ids;
  out.finished = finished;
  out.error = s.error;
  out.metrics = s.metrics;
  for (int i = 0; i < static_cast<int>(s.samples.size()); ++i) {
    const Sample& each = s.samples[i];
    std::optional<tokenizer::CompletionSlice> slice =
        shaper.Take(i, TextOf(each), each.all.token_ids.size());
    if (slice.has_value()) out.outputs.push_back(SliceOf(each.all, std::move(*slice)));
  }
  // DELTA sends the prompt logprobs once; the other modes in every output.
  if (shaper.mode() != tokenizer::OutputMode::kDelta || !s.prompt_logprobs_sent) {
    out.prompt_logprobs = s.prompt_logprobs;
    out.prompt_top_logprobs = s.prompt_top_logprobs;
    s.prompt_logprobs_sent = !s.prompt_logprobs.empty();
  }
  result.stream = s.stream;
  result.output = std::move(out);
  if (finished) requests_.erase(it);
  return result;
}

void OutputProcessor::Finish(const std::string& request_id, RequestState state,
                             const absl::Status& error) {
  for (const std::string& id : SampleIds(request_id)) {
    EngineCoreOutput o;
    o.request_id = id;
    o.state = state;
    o.error = error;
    o.times.finished = absl::Now();
    Process(o).Deliver();
  }
}

}  // namespace rill::engine
