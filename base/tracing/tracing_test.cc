#include <httplib.h>

#include <atomic>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/json.h"
#include "base/tracing/otlp_json.h"
#include "base/tracing/span_exporter.h"
#include "base/tracing/trace_context.h"
#include "gtest/gtest.h"

namespace rill::base::tracing {
namespace {

using ::rill::base::json::JsonValue;
using ::rill::base::json::ParseJson;

constexpr char kTrace[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kSpan[] = "00f067aa0ba902b7";

TEST(TraceparentTest, ParsesAValidHeader) {
  std::optional<TraceContext> c = ParseTraceparent(absl::StrCat("00-", kTrace, "-", kSpan, "-01"));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->trace_id, kTrace);
  EXPECT_EQ(c->span_id, kSpan);
  EXPECT_TRUE(c->sampled);
  c = ParseTraceparent(absl::StrCat("00-", kTrace, "-", kSpan, "-00"));
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(c->sampled);
}

TEST(TraceparentTest, AcceptsLaterVersionsWithExtraFields) {
  EXPECT_TRUE(ParseTraceparent(absl::StrCat("01-", kTrace, "-", kSpan, "-01")).has_value());
  EXPECT_TRUE(ParseTraceparent(absl::StrCat("01-", kTrace, "-", kSpan, "-01-future")).has_value());
  EXPECT_FALSE(ParseTraceparent(absl::StrCat("01-", kTrace, "-", kSpan, "-01x")).has_value());
}

TEST(TraceparentTest, IgnoresMalformedHeaders) {
  const std::string bad[] = {
      "",
      "garbage",
      "00-abc-def-01",
      absl::StrCat("ff-", kTrace, "-", kSpan, "-01"),                      // Forbidden version.
      absl::StrCat("00-", kTrace, "-", kSpan, "-01-extra"),                // 00 has four fields.
      absl::StrCat("00-", std::string(32, '0'), "-", kSpan, "-01"),        // All-zero trace id.
      absl::StrCat("00-", kTrace, "-", std::string(16, '0'), "-01"),       // All-zero span id.
      absl::StrCat("00-", std::string(kTrace).substr(1), "-", kSpan, "-01"),  // Short trace id.
      absl::StrCat("00-", kTrace, "-", kSpan, "0-01"),                     // Long span id.
      absl::StrCat("00-", "4BF92F3577B34DA6A3CE929D0E0E4736", "-", kSpan, "-01"),  // Uppercase.
      absl::StrCat("00-", kTrace, "-", kSpan, "-0g"),                      // Not hex.
      absl::StrCat("00_", kTrace, "_", kSpan, "_01"),                      // Separators.
  };
  for (const std::string& h : bad) EXPECT_FALSE(ParseTraceparent(h).has_value()) << h;
}

TEST(TraceparentTest, NewIdsAreHexAndRoundTrip) {
  const std::string t = NewTraceId();
  const std::string s = NewSpanId();
  EXPECT_EQ(t.size(), 32u);
  EXPECT_EQ(s.size(), 16u);
  EXPECT_NE(NewTraceId(), t);
  std::optional<TraceContext> c = ParseTraceparent(FormatTraceparent(t, s, true));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->trace_id, t);
  EXPECT_EQ(c->span_id, s);
}

Span SampleSpan() {
  Span s;
  s.trace_id = kTrace;
  s.span_id = kSpan;
  s.parent_span_id = "1111111111111111";
  s.name = "llm_request \"x\"";
  s.kind = SpanKind::kServer;
  s.start = absl::FromUnixNanos(1700000000123456789);
  s.end = absl::FromUnixNanos(1700000001000000000);
  s.Set("gen_ai.request.id", std::string("r1"));
  s.Set("gen_ai.usage.prompt_tokens", int64_t{12});
  s.Set("gen_ai.request.temperature", 0.5);
  s.Set("rill.cancelled", false);
  return s;
}

TEST(OtlpJsonTest, EncodesTheExportRequest) {
  absl::StatusOr<JsonValue> doc = ParseJson(EncodeOtlpJson({SampleSpan()}, "rill-test"));
  ASSERT_TRUE(doc.ok()) << doc.status();
  const JsonValue& rs = doc->Find("resourceSpans")->array_items().at(0);
  const JsonValue& rattr = rs.Find("resource")->Find("attributes")->array_items().at(0);
  EXPECT_EQ(rattr.Find("key")->string_value(), "service.name");
  EXPECT_EQ(rattr.Find("value")->Find("stringValue")->string_value(), "rill-test");
  const JsonValue& ss = rs.Find("scopeSpans")->array_items().at(0);
  const JsonValue& span = ss.Find("spans")->array_items().at(0);
  EXPECT_EQ(span.Find("traceId")->string_value(), kTrace);
  EXPECT_EQ(span.Find("spanId")->string_value(), kSpan);
  EXPECT_EQ(span.Find("parentSpanId")->string_value(), "1111111111111111");
  EXPECT_EQ(span.Find("name")->string_value(), "llm_request \"x\"");
  EXPECT_EQ(span.Find("kind")->AsInt64(), 2);
  EXPECT_EQ(span.Find("startTimeUnixNano")->string_value(), "1700000000123456789");
  EXPECT_EQ(span.Find("endTimeUnixNano")->string_value(), "1700000001000000000");
  EXPECT_EQ(span.Find("status"), nullptr);
  const auto& attrs = span.Find("attributes")->array_items();
  ASSERT_EQ(attrs.size(), 4u);
  EXPECT_EQ(attrs[0].Find("value")->Find("stringValue")->string_value(), "r1");
  EXPECT_EQ(attrs[1].Find("value")->Find("intValue")->string_value(), "12");
  EXPECT_EQ(attrs[2].Find("value")->Find("doubleValue")->number_value(), 0.5);
  EXPECT_FALSE(attrs[3].Find("value")->Find("boolValue")->bool_value());
}

TEST(OtlpJsonTest, RootSpanHasNoParentAndErrorsHaveStatus) {
  Span s = SampleSpan();
  s.parent_span_id.clear();
  s.error = true;
  s.status_message = "boom";
  absl::StatusOr<JsonValue> doc = ParseJson(EncodeOtlpJson({s, s}, "x"));
  ASSERT_TRUE(doc.ok()) << doc.status();
  const auto& spans = doc->Find("resourceSpans")->array_items()[0].Find("scopeSpans")->array_items()[0]
                          .Find("spans")->array_items();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].Find("parentSpanId"), nullptr);
  EXPECT_EQ(spans[0].Find("status")->Find("code")->AsInt64(), 2);
  EXPECT_EQ(spans[0].Find("status")->Find("message")->string_value(), "boom");
}

TEST(SpanExporterTest, RejectsNonHttpEndpoints) {
  EXPECT_FALSE(CreateExporterIfEnabled("localhost:4318", "x").ok());
  EXPECT_FALSE(CreateExporterIfEnabled("https://collector:4318", "x").ok());
  absl::StatusOr<std::unique_ptr<SpanExporter>> off = CreateExporterIfEnabled("", "x");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, nullptr);
}

TEST(SpanExporterTest, PostsBatchesToTheCollector) {
  httplib::Server server;
  absl::Mutex mu;
  std::vector<std::string> bodies;
  std::string content_type;
  server.Post("/prefix/v1/traces", [&](const httplib::Request& req, httplib::Response& res) {
    absl::MutexLock lock(&mu);
    bodies.push_back(req.body);
    content_type = req.get_header_value("Content-Type");
    res.set_content("{}", "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { server.listen_after_bind(); });
  {
    ExporterOptions options;
    options.endpoint = absl::StrCat("http://127.0.0.1:", port, "/prefix/");
    options.service_name = "rill-test";
    options.flush_interval = absl::Milliseconds(20);
    absl::StatusOr<std::unique_ptr<SpanExporter>> exporter = SpanExporter::Create(options);
    ASSERT_TRUE(exporter.ok()) << exporter.status();
    for (int i = 0; i < 3; ++i) (*exporter)->Export(SampleSpan());
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while ((*exporter)->exported() < 3 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
    EXPECT_EQ((*exporter)->exported(), 3);
    EXPECT_EQ((*exporter)->dropped(), 0);
  }
  server.stop();
  serving.join();
  absl::MutexLock lock(&mu);
  ASSERT_FALSE(bodies.empty());
  EXPECT_EQ(content_type, "application/json");
  EXPECT_TRUE(ParseJson(bodies[0]).ok());
}

TEST(SpanExporterTest, ADeadCollectorNeverBlocksExport) {
  // A port nothing listens on: sends fail fast, Export stays non-blocking
  // and spans beyond the queue are dropped and counted.
  httplib::Server probe;
  const int port = probe.bind_to_any_port("127.0.0.1");
  probe.stop();
  ExporterOptions options;
  options.endpoint = absl::StrCat("http://127.0.0.1:", port);
  options.service_name = "x";
  options.max_queued_spans = 8;
  options.http_timeout = absl::Milliseconds(200);
  absl::StatusOr<std::unique_ptr<SpanExporter>> exporter = SpanExporter::Create(options);
  ASSERT_TRUE(exporter.ok());
  const absl::Time start = absl::Now();
  for (int i = 0; i < 1000; ++i) (*exporter)->Export(SampleSpan());
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_GE((*exporter)->dropped(), 1000 - 8);
  EXPECT_EQ((*exporter)->exported(), 0);
}

}  // namespace
}  // namespace rill::base::tracing
