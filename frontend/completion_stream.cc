#include "frontend/completion_stream.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace rill::frontend {

using rill::v1::FinishReason;
using rill::v1::GenerateResponse;

namespace {

tokenizer::OutputMode ModeOf(rill::v1::OutputMode mode) {
  switch (mode) {
    case rill::v1::OUTPUT_MODE_CUMULATIVE:
      return tokenizer::OutputMode::kCumulative;
    case rill::v1::OUTPUT_MODE_FINAL_ONLY:
      return tokenizer::OutputMode::kFinalOnly;
    default:
      return tokenizer::OutputMode::kDelta;
  }
}

int NumCompletions(const rill::v1::StartRequest& start) {
  return std::max<int>(start.sampling().has_n() ? static_cast<int>(start.sampling().n()) : 1, 1);
}

}  // namespace

double NowSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

CompletionStream::CompletionStream(const tokenizer::Tokenizer* tok,
                                   const rill::v1::StartRequest& start,
                                   std::string request_id,
                                   std::vector<int32_t> prompt_ids,
                                   std::string prompt_text)
    : tok_(tok),
      request_id_(std::move(request_id)),
      want_logprobs_(start.sampling().logprobs() > 0),
      prompt_ids_(std::move(prompt_ids)),
      prompt_text_(std::move(prompt_text)),
      completions_(NumCompletions(start)),
      // The stream sends what changed: an unchanged completion is not repeated.
      shaper_(ModeOf(start.output_mode()), NumCompletions(start),
              tokenizer::OutputShaper::CumulativeListing::kChanged),
      arrival_time_(NowSeconds()) {
  const tokenizer::StopStringOptions stop{
      {start.sampling().stop().begin(), start.sampling().stop().end()},
      start.sampling().include_stop_str_in_output(), start.sampling().min_tokens()};
  bool skip = start.sampling().has_skip_special_tokens()
                  ? start.sampling().skip_special_tokens()
                  : true;
  for (Completion& c : completions_) {
    c.text = std::make_unique<tokenizer::CompletionText>(&tok_->bpe(), skip, stop);
  }
}

void CompletionStream::FillTokenText(rill::v1::PositionLogprobs* lp) const {
  auto text = [this](int32_t id) -> std::string {
    auto s = tok_->Decode({id}, false);
    return s.ok() ? *s : std::string();
  };
  if (lp->has_chosen()) lp->mutable_chosen()->set_token(text(lp->chosen().token_id()));
  for (auto& t : *lp->mutable_top()) t.set_token(text(t.token_id()));
}

bool CompletionStream::PushToken(Completion* c, int32_t id) {
  c->ids.push_back(id);
  if (!c->text->Push(id)) return false;
  c->finished = true;
  c->reason = rill::v1::FINISH_REASON_STOP;
  shaper_.Finish(c - completions_.data());
  return true;
}

void CompletionStream::End(Completion* c, rill::v1::FinishReason reason) {
  c->text->Finish();
  c->finished = true;
  c->reason = reason;
  shaper_.Finish(c - completions_.data());
}

CompletionStream::Result CompletionStream::OnOutput(
    const rill::internal::EngineOutput& out) {
  Result r;
  if (done_) return r;
  if (out.has_status() && out.status().code() != 0) {
    r.response = Finish(rill::v1::FINISH_REASON_ERROR, out.status().code(),
                        out.status().message());
    r.done = true;
    return r;
  }
  if (out.prompt_logprobs_size() > 0) {
    prompt_logprobs_ = out.prompt_logprobs();
    for (auto& lp : prompt_logprobs_) FillTokenText(&lp);
  }
  if (out.has_metrics()) {
    engine_metrics_ = out.metrics();
    have_engine_metrics_ = true;
  }
  for (const auto& d : out.outputs()) {
    if (d.index() >= completions_.size()) continue;
    Completion& c = completions_[d.index()];
    if (c.finished) continue;
    if (first_token_time_ == 0 && d.token_ids_size() > 0) first_token_time_ = NowSeconds();
    c.cumulative_logprob = d.cumulative_logprob();
    for (int i = 0; i < d.token_ids_size(); ++i) {
      if (i < d.logprobs_size()) {
        c.logprobs.push_back(d.logprobs(i));
        FillTokenText(&c.logprobs.back());
      }
      if (PushToken(&c, d.token_ids(i))) break;
    }
    if (!c.finished && d.finish_reason() != rill::v1::FINISH_REASON_UNSPECIFIED) {
      End(&c, d.finish_reason());
      if (d.has_stop_token_id()) c.stop_token_id = d.stop_token_id();
    }
  }
  bool all_finished = true;
  for (const Completion& c : completions_) all_finished &= c.finished;
  if (out.finished() && !all_finished) {
    // The engine ended the request without a reason for some completion.
    for (Completion& c : completions_) {
      if (!c.finished) End(&c, rill::v1::FINISH_REASON_ABORT);
    }
    all_finished = true;
  }
  if (all_finished) {
    done_ = true;
    r.done = true;
    r.abort_engine = !out.finished();
    r.response = Build(true);
    return r;
  }
  if (shaper_.Emits()) {
    GenerateResponse resp = Build(false);
    if (resp.outputs_size() > 0 || !first_sent_) r.response = std::move(resp);
  }
  return r;
}

GenerateResponse CompletionStream::Finish(FinishReason reason, int code,
                                          const std::string& message) {
  for (Completion& c : completions_) {
    if (!c.finished) End(&c, reason);
  }
  done_ = true;
  GenerateResponse resp = Build(true);
  if (code != 0) {
    resp.mutable_status()->set_code(code);
    resp.mutable_status()->set_message(message);
  }
  return resp;
}

GenerateResponse CompletionStream::Build(bool final_response) {
  GenerateResponse resp;
  resp.set_request_id(request_id_);
  if (!first_sent_) {
    for (int32_t id : prompt_ids_) resp.add_prompt_token_ids(id);
    resp.set_prompt(prompt_text_);
    *resp.mutable_prompt_logprobs() = prompt_logprobs_;
    first_sent_ = true;
  }
  for (size_t i = 0; i < completions_.size(); ++i) {
    const Completion& c = completions_[i];
    std::optional<tokenizer::CompletionSlice> slice =
        shaper_.Take(i, c.text->text(), c.ids.size());
    if (!slice.has_value()) continue;
    rill::v1::Completion* o = resp.add_outputs();
    o->set_index(i);
    o->set_text(std::move(slice->text));
    for (size_t k = slice->token_begin; k < slice->token_end; ++k) o->add_token_ids(c.ids[k]);
    if (want_logprobs_) {
      for (size_t k = slice->token_begin; k < c.logprobs.size(); ++k) {
        *o->add_logprobs() = c.logprobs[k];
      }
    }
    o->set_cumulative_logprob(c.cumulative_logprob);
    if (slice->finished) {
      o->set_finish_reason(c.reason);
      if (c.stop_token_id) o->set_stop_token_id(*c.stop_token_id);
      if (c.text->stop_string()) o->set_stop_string(*c.text->stop_string());
    }
  }
  if (final_response) {
    resp.set_finished(true);
    rill::v1::RequestMetrics* m = resp.mutable_metrics();
    if (have_engine_metrics_) *m = engine_metrics_;
    if (m->arrival_time() == 0) m->set_arrival_time(arrival_time_);
    if (m->first_token_time() == 0) m->set_first_token_time(first_token_time_);
    if (m->finished_time() == 0) m->set_finished_time(NowSeconds());
    if (m->num_prompt_tokens() == 0) m->set_num_prompt_tokens(prompt_ids_.size());
    if (m->num_generated_tokens() == 0) {
      int64_t n = 0;
      for (const Completion& c : completions_) n += c.ids.size();
      m->set_num_generated_tokens(n);
    }
  }
  return resp;
}

}  // namespace rill::frontend
