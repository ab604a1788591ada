#include "engine/service/request_spans.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace rill::engine::service {
namespace {

constexpr char kTrace[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kParent[] = "00f067aa0ba902b7";

class RequestSpansTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base::tracing::ExporterOptions options;
    options.endpoint = "http://127.0.0.1:1";  // Never sent to: Spans() only builds.
    tracer_ = *base::tracing::SpanExporter::Create(options);
    start_.set_request_id("r1");
    start_.add_prompt_token_ids(1);
    start_.add_prompt_token_ids(2);
    start_.mutable_sampling()->set_max_tokens(7);
  }

  engine::RequestOutput Finished(int scheduled_ms, int first_token_ms, int finished_ms) {
    engine::RequestOutput out;
    out.finished = true;
    const absl::Time t0 = absl::FromUnixSeconds(1700000000);
    out.metrics.arrival_time = t0;
    if (scheduled_ms >= 0) out.metrics.first_scheduled_time = t0 + absl::Milliseconds(scheduled_ms);
    if (first_token_ms >= 0) out.metrics.first_token_time = t0 + absl::Milliseconds(first_token_ms);
    out.metrics.finished_time = t0 + absl::Milliseconds(finished_ms);
    engine::CompletionOutput c;
    c.finish_reason = "length";
    c.token_ids = {5, 6};
    out.outputs.push_back(c);
    return out;
  }

  std::unique_ptr<base::tracing::SpanExporter> tracer_;
  rill::internal::EngineStart start_;
};

TEST_F(RequestSpansTest, OffWithoutATracer) {
  EXPECT_EQ(RequestSpans::Begin(nullptr, start_), nullptr);
}

TEST_F(RequestSpansTest, QueuePrefillDecodeAreChildrenOfTheGivenParent) {
  (*start_.mutable_trace_headers())["traceparent"] = absl::StrCat("00-", kTrace, "-", kParent, "-01");
  std::shared_ptr<RequestSpans> spans = RequestSpans::Begin(tracer_.get(), start_);
  ASSERT_NE(spans, nullptr);
  std::vector<base::tracing::Span> s = spans->Spans(Finished(10, 30, 100));
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].name, "queue");
  EXPECT_EQ(s[1].name, "prefill");
  EXPECT_EQ(s[2].name, "decode");
  for (const auto& span : s) {
    EXPECT_EQ(span.trace_id, kTrace);
    EXPECT_EQ(span.parent_span_id, kParent);
    EXPECT_EQ(span.span_id.size(), 16u);
  }
  EXPECT_EQ(s[0].end - s[0].start, absl::Milliseconds(10));
  EXPECT_EQ(s[1].end - s[1].start, absl::Milliseconds(20));
  EXPECT_EQ(s[2].end - s[2].start, absl::Milliseconds(70));
  EXPECT_EQ(s[0].end, s[1].start);
  EXPECT_EQ(s[1].end, s[2].start);
}

TEST_F(RequestSpansTest, AMalformedParentStartsANewTrace) {
  (*start_.mutable_trace_headers())["traceparent"] = "00-abc-def-01";
  std::vector<base::tracing::Span> s = RequestSpans::Begin(tracer_.get(), start_)->Spans(Finished(1, 2, 3));
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].trace_id.size(), 32u);
  EXPECT_TRUE(s[0].parent_span_id.empty());
  EXPECT_EQ(s[1].trace_id, s[0].trace_id);
}

TEST_F(RequestSpansTest, ARequestEndedWhileWaitingHasOnlyItsQueueSpan) {
  std::vector<base::tracing::Span> s = RequestSpans::Begin(tracer_.get(), start_)->Spans(Finished(-1, -1, 50));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].name, "queue");
  EXPECT_EQ(s[0].end - s[0].start, absl::Milliseconds(50));
  s = RequestSpans::Begin(tracer_.get(), start_)->Spans(Finished(5, -1, 50));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].name, "prefill");
}

// VllmEngine/Generate's path: the trace context from the call metadata.
TEST_F(RequestSpansTest, InfoFromAnyApiCarriesItsTraceContextAndAttributes) {
  RequestSpanInfo info;
  info.request_id = "v1";
  info.prompt_tokens = 5;
  info.n = 2;
  info.traceparent = absl::StrCat("00-", kTrace, "-", kParent, "-01");
  info.tracestate = "gw=1";
  std::vector<base::tracing::Span> s = RequestSpans::Begin(tracer_.get(), info)->Spans(Finished(1, 2, 3));
  ASSERT_EQ(s.size(), 3u);
  for (const auto& span : s) {
    EXPECT_EQ(span.trace_id, kTrace);
    EXPECT_EQ(span.parent_span_id, kParent);
    EXPECT_EQ(span.trace_state, "gw=1");
  }
  // Without a valid parent the tracestate is not kept either.
  info.traceparent = "garbage";
  s = RequestSpans::Begin(tracer_.get(), info)->Spans(Finished(1, 2, 3));
  EXPECT_TRUE(s[0].parent_span_id.empty());
  EXPECT_TRUE(s[0].trace_state.empty());
  EXPECT_EQ(RequestSpans::Begin(nullptr, info), nullptr);
}

}  // namespace
}  // namespace rill::engine::service
