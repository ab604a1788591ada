#include "frontend/completion_stream.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace rill::frontend {

using rill::v1::FinishReason;
using rill::v1::GenerateResponse;

double NowSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

CompletionStream::CompletionStream(const tokenizer::Tokenizer* tok,
                                   const rill::v1::StartRequest& start,
                                   std::string request_id,
                                   std::vector<int32_t> prompt_ids,
                                   std::string prompt_text)
    : tok_(tok),
      request_id_(std::move(request_id)),
      mode_(start.output_mode()),
      want_logprobs_(start.sampling().logprobs() > 0),
      prompt_ids_(std::move(prompt_ids)),
      prompt_text_(std::move(prompt_text)),
      arrival_time_(NowSeconds()) {
  const tokenizer::StopStringOptions stop{
      {start.sampling().stop().begin(), start.sampling().stop().end()},
      start.sampling().include_stop_str_in_output()};
  int n = start.sampling().has_n() ? start.sampling().n() : 1;
  bool skip = start.sampling().has_skip_special_tokens()
                  ? start.sampling().skip_special_tokens()
                  : true;
  completions_.resize(std::max(n, 1));
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
  c->news = true;
  if (!c->text->Push(id)) return false;
  c->finished = true;
  c->reason = rill::v1::FINISH_REASON_STOP;
  return true;
}

void CompletionStream::End(Completion* c, rill::v1::FinishReason reason) {
  c->text->Finish();
  c->finished = true;
  c->news = true;
  c->reason = reason;
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
  if (mode_ != rill::v1::OUTPUT_MODE_FINAL_ONLY) {
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
  const bool cumulative = mode_ != rill::v1::OUTPUT_MODE_DELTA;
  for (size_t i = 0; i < completions_.size(); ++i) {
    Completion& c = completions_[i];
    bool has_news = c.news || (c.finished && !c.reported_finished);
    if (mode_ == rill::v1::OUTPUT_MODE_DELTA) {
      has_news = c.text->text().size() > c.sent_text || c.ids.size() > c.sent_ids ||
                 (c.finished && !c.reported_finished);
    }
    if (mode_ == rill::v1::OUTPUT_MODE_FINAL_ONLY) has_news = true;
    if (!has_news) continue;
    rill::v1::Completion* o = resp.add_outputs();
    o->set_index(i);
    size_t from_text = cumulative ? 0 : c.sent_text;
    size_t from_ids = cumulative ? 0 : c.sent_ids;
    o->set_text(c.text->text().substr(from_text));
    for (size_t k = from_ids; k < c.ids.size(); ++k) o->add_token_ids(c.ids[k]);
    if (want_logprobs_) {
      for (size_t k = from_ids; k < c.logprobs.size(); ++k) *o->add_logprobs() = c.logprobs[k];
    }
    o->set_cumulative_logprob(c.cumulative_logprob);
    if (c.finished) {
      o->set_finish_reason(c.reason);
      if (c.stop_token_id) o->set_stop_token_id(*c.stop_token_id);
      if (c.text->stop_string()) o->set_stop_string(*c.text->stop_string());
      c.reported_finished = true;
    }
    c.sent_text = c.text->text().size();
    c.sent_ids = c.ids.size();
    c.news = false;
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
