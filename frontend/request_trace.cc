#include "frontend/request_trace.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/tracing/trace_context.h"

namespace rill::frontend {
namespace {

using base::tracing::ParseTraceparent;
using base::tracing::Span;
using base::tracing::TraceContext;

// A header from the request's trace_headers, else from the call metadata
// (gRPC keys are lowercase).
std::string Header(const rill::v1::StartRequest& start, const grpc::ServerContext& ctx,
                   const std::string& key) {
  auto it = start.trace_headers().find(key);
  if (it != start.trace_headers().end()) return it->second;
  const auto& md = ctx.client_metadata();
  auto m = md.find(key);
  return m == md.end() ? "" : std::string(m->second.data(), m->second.size());
}

std::string FinishReasonName(rill::v1::FinishReason r) {
  switch (r) {
    case rill::v1::FINISH_REASON_STOP: return "stop";
    case rill::v1::FINISH_REASON_LENGTH: return "length";
    case rill::v1::FINISH_REASON_ABORT: return "abort";
    case rill::v1::FINISH_REASON_ERROR: return "error";
    default: return "";
  }
}

double Since(double later, double earlier) {
  return later > 0 && earlier > 0 ? later - earlier : 0.0;
}

}  // namespace

RequestTrace BeginRequestTrace(const std::string& request_id, const rill::v1::StartRequest& start,
                               const grpc::ServerContext& ctx, absl::Time received,
                               rill::internal::EngineStart* engine_start) {
  RequestTrace t;
  Span& s = t.span;
  s.name = "llm_request";
  s.kind = base::tracing::SpanKind::kServer;
  s.start = received;
  s.span_id = base::tracing::NewSpanId();
  bool sampled = true;
  if (std::optional<TraceContext> parent = ParseTraceparent(Header(start, ctx, "traceparent"))) {
    s.trace_id = parent->trace_id;
    s.parent_span_id = parent->span_id;
    s.trace_state = Header(start, ctx, "tracestate");
    sampled = parent->sampled;
  } else {
    s.trace_id = base::tracing::NewTraceId();
  }
  auto& headers = *engine_start->mutable_trace_headers();
  headers["traceparent"] = base::tracing::FormatTraceparent(s.trace_id, s.span_id, sampled);
  if (!s.trace_state.empty()) headers["tracestate"] = s.trace_state;
  const rill::v1::SamplingParams& p = start.sampling();
  s.Set("gen_ai.request.id", request_id);
  s.Set("gen_ai.usage.prompt_tokens", static_cast<int64_t>(engine_start->prompt_token_ids_size()));
  if (p.has_max_tokens()) s.Set("gen_ai.request.max_tokens", static_cast<int64_t>(p.max_tokens()));
  s.Set("gen_ai.request.temperature", static_cast<double>(p.has_temperature() ? p.temperature() : 1.0f));
  s.Set("gen_ai.request.top_p", static_cast<double>(p.has_top_p() ? p.top_p() : 1.0f));
  s.Set("gen_ai.request.n", static_cast<int64_t>(p.has_n() ? p.n() : 1));
  return t;
}

void RequestTrace::RecordDetokenize(absl::Time start, absl::Time end, int64_t tokens) {
  if (detokenize_first == absl::InfinitePast()) detokenize_first = start;
  detokenize_last = end;
  detokenize += end - start;
  detokenized_tokens += tokens;
}

std::vector<Span> EndRequestTrace(RequestTrace trace, const rill::v1::GenerateResponse& last) {
  std::vector<Span> spans;
  Span& s = spans.emplace_back(std::move(trace.span));
  s.end = absl::Now();
  std::vector<std::string> reasons;
  for (const rill::v1::Completion& c : last.outputs()) {
    if (std::string r = FinishReasonName(c.finish_reason()); !r.empty()) reasons.push_back(r);
  }
  s.Set("gen_ai.response.finish_reasons", absl::StrJoin(reasons, ","));
  const rill::v1::RequestMetrics& m = last.metrics();
  s.Set("gen_ai.usage.completion_tokens", m.num_generated_tokens());
  s.Set("gen_ai.latency.time_in_queue", Since(m.first_scheduled_time(), m.arrival_time()));
  s.Set("gen_ai.latency.time_to_first_token", Since(m.first_token_time(), m.arrival_time()));
  s.Set("gen_ai.latency.e2e", absl::ToDoubleSeconds(s.end - s.start));
  s.Set("gen_ai.latency.time_in_model_prefill", Since(m.first_token_time(), m.first_scheduled_time()));
  s.Set("gen_ai.latency.time_in_model_decode", Since(m.finished_time(), m.first_token_time()));
  s.Set("rill.detokenize_time_s", absl::ToDoubleSeconds(trace.detokenize));
  if (last.status().code() != 0) {
    s.error = true;
    s.status_message = last.status().message();
  }
  if (trace.detokenize_first != absl::InfinitePast()) {
    // Spans from the first detokenization to the last; the gaps between are
    // the engine's, so the busy time is an attribute of its own.
    Span d;
    d.name = "detokenize";
    d.trace_id = s.trace_id;
    d.span_id = base::tracing::NewSpanId();
    d.parent_span_id = s.span_id;
    d.trace_state = s.trace_state;
    d.start = trace.detokenize_first;
    d.end = trace.detokenize_last;
    d.Set("rill.detokenize_time_s", absl::ToDoubleSeconds(trace.detokenize));
    d.Set("rill.detokenized_tokens", trace.detokenized_tokens);
    spans.push_back(std::move(d));
  }
  return spans;
}

}  // namespace rill::frontend
