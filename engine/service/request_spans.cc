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
                                                  RequestSpanInfo info) {
  if (tracer == nullptr) return nullptr;
  return std::shared_ptr<RequestSpans>(new RequestSpans(tracer, std::move(info)));
}

std::shared_ptr<RequestSpans> RequestSpans::Begin(base::tracing::SpanExporter* tracer,
                                                  const rill::internal::EngineStart& start) {
  if (tracer == nullptr) return nullptr;
  RequestSpanInfo info;
  info.request_id = start.request_id();
  info.prompt_tokens = start.prompt_token_ids_size();
  if (start.sampling().has_max_tokens()) info.max_tokens = start.sampling().max_tokens();
  info.n = start.sampling().has_n() ? start.sampling().n() : 1;
  const auto& headers = start.trace_headers();
  if (auto tp = headers.find("traceparent"); tp != headers.end()) info.traceparent = tp->second;
  if (auto ts = headers.find("tracestate"); ts != headers.end()) info.tracestate = ts->second;
  return Begin(tracer, std::move(info));
}

RequestSpans::RequestSpans(base::tracing::SpanExporter* tracer, RequestSpanInfo info)
    : tracer_(tracer), info_(std::move(info)) {
  std::optional<base::tracing::TraceContext> parent =
      info_.traceparent.empty() ? std::nullopt : base::tracing::ParseTraceparent(info_.traceparent);
  if (parent.has_value()) {
    trace_id_ = parent->trace_id;
    parent_span_id_ = parent->span_id;
    trace_state_ = info_.tracestate;
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
    s.Set("gen_ai.request.id", info_.request_id);
    s.Set("gen_ai.usage.prompt_tokens", info_.prompt_tokens);
    s.Set("gen_ai.usage.completion_tokens", generated_tokens_);
    s.Set("gen_ai.usage.num_cached_tokens", m.num_cached_tokens);
    s.Set("gen_ai.usage.num_preemptions", static_cast<int64_t>(m.num_preemptions));
    if (info_.max_tokens.has_value()) s.Set("gen_ai.request.max_tokens", *info_.max_tokens);
    s.Set("gen_ai.request.n", info_.n);
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
