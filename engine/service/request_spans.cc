#include "engine/service/request_spans.h"

#include <optional>
#include <utility>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/tracing/trace_context.h"

namespace rill::engine::service {
namespace {

using base::tracing::Span;

bool Known(absl::Time t) { return t != absl::InfinitePast(); }

}  // namespace

std::shared_ptr<RequestSpans> RequestSpans::Begin(base::tracing::SpanExporter* tracer,
                                                  const rill::internal::EngineStart& start) {
  if (tracer == nullptr) return nullptr;
  return std::shared_ptr<RequestSpans>(new RequestSpans(tracer, start));
}

RequestSpans::RequestSpans(base::tracing::SpanExporter* tracer, const rill::internal::EngineStart& start)
    : tracer_(tracer),
      request_id_(start.request_id()),
      prompt_tokens_(start.prompt_token_ids_size()),
      sampling_(start.sampling()) {
  const auto& headers = start.trace_headers();
  auto tp = headers.find("traceparent");
  std::optional<base::tracing::TraceContext> parent =
      tp == headers.end() ? std::nullopt : base::tracing::ParseTraceparent(tp->second);
  if (parent.has_value()) {
    trace_id_ = parent->trace_id;
    parent_span_id_ = parent->span_id;
    if (auto ts = headers.find("tracestate"); ts != headers.end()) trace_state_ = ts->second;
  } else {
    trace_id_ = base::tracing::NewTraceId();
  }
}

void RequestSpans::OnOutput(const engine::RequestOutput& out) {
  for (const engine::CompletionOutput& c : out.outputs) generated_tokens_ += c.token_ids.size();
  if (!out.finished) return;
  for (Span& s : Spans(out)) tracer_->Export(std::move(s));
}

std::vector<Span> RequestSpans::Spans(const engine::RequestOutput& last) const {
  const engine::RequestMetrics& m = last.metrics;
  const absl::Time finished = Known(m.finished_time) ? m.finished_time : absl::Now();
  std::vector<std::string> reasons;
  for (const engine::CompletionOutput& c : last.outputs) {
    if (!c.finish_reason.empty()) reasons.push_back(c.finish_reason);
  }
  auto make = [&](std::string name, absl::Time start, absl::Time end) {
    Span s;
    s.trace_id = trace_id_;
    s.span_id = base::tracing::NewSpanId();
    s.parent_span_id = parent_span_id_;
    s.trace_state = trace_state_;
    s.name = std::move(name);
    s.start = start;
    s.end = end;
    s.Set("gen_ai.request.id", request_id_);
    s.Set("gen_ai.usage.prompt_tokens", prompt_tokens_);
    s.Set("gen_ai.usage.completion_tokens", generated_tokens_);
    s.Set("gen_ai.usage.num_cached_tokens", m.num_cached_tokens);
    s.Set("gen_ai.usage.num_preemptions", static_cast<int64_t>(m.num_preemptions));
    if (sampling_.has_max_tokens()) {
      s.Set("gen_ai.request.max_tokens", static_cast<int64_t>(sampling_.max_tokens()));
    }
    s.Set("gen_ai.request.n", static_cast<int64_t>(sampling_.has_n() ? sampling_.n() : 1));
    s.Set("gen_ai.response.finish_reasons", absl::StrJoin(reasons, ","));
    s.Set("gen_ai.latency.duration", absl::ToDoubleSeconds(end - start));
    if (!last.error.ok()) {
      s.error = true;
      s.status_message = std::string(last.error.message());
    }
    return s;
  };
  const absl::Time arrival = Known(m.arrival_time) ? m.arrival_time : finished;
  std::vector<Span> spans;
  // A request aborted or failed while waiting has only its queue span.
  const absl::Time scheduled = Known(m.first_scheduled_time) ? m.first_scheduled_time : finished;
  spans.push_back(make("queue", arrival, scheduled));
  if (!Known(m.first_scheduled_time)) return spans;
  const absl::Time first_token = Known(m.first_token_time) ? m.first_token_time : finished;
  spans.push_back(make("prefill", scheduled, first_token));
  if (!Known(m.first_token_time)) return spans;
  spans.push_back(make("decode", first_token, finished));
  return spans;
}

}  // namespace rill::engine::service
