#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "base/metrics/registry.h"
#include "base/metrics/text_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rill::base::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST(TextFormatTest, CounterAndGaugeWithLabelsInDeclaredOrderAndChildrenSorted) {
  Registry r;
  CounterFamily& c = r.AddCounter("vllm:request_success_total", "Finished requests.",
                                  {"model_name", "finished_reason"});
  c.Labels({"m", "stop"}).Increment(3);
  c.Labels({"m", "length"}).Increment();
  c.Labels({"m", "length"}).Increment(-5);  // Counters never go down.
  GaugeFamily& g = r.AddGauge("vllm:num_requests_running", "Running.", {"model_name"});
  g.Labels({"m"}).Set(2.5);
  EXPECT_THAT(Lines(TextFormat(r.Collect())),
              ElementsAre("# HELP vllm:request_success_total Finished requests.",
                          "# TYPE vllm:request_success_total counter",
                          "vllm:request_success_total{model_name=\"m\",finished_reason=\"length\"} 1",
                          "vllm:request_success_total{model_name=\"m\",finished_reason=\"stop\"} 3",
                          "# HELP vllm:num_requests_running Running.",
                          "# TYPE vllm:num_requests_running gauge",
                          "vllm:num_requests_running{model_name=\"m\"} 2.5"));
}

TEST(TextFormatTest, EscapesHelpAndLabelValues) {
  Registry r;
  r.AddGauge("g", "a \\ b\nc \"q\"", {"l"}).Labels({"x\"y\\z\nw"}).Set(1);
  const std::string text = TextFormat(r.Collect());
  EXPECT_THAT(text, HasSubstr("# HELP g a \\\\ b\\nc \"q\"\n"));
  EXPECT_THAT(text, HasSubstr("g{l=\"x\\\"y\\\\z\\nw\"} 1\n"));
}

TEST(TextFormatTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  Registry r;
  HistogramFamily& h = r.AddHistogram("lat_seconds", "Latency.", {"model_name"}, {0.1, 1, 10});
  Histogram& child = h.Labels({"m"});
  for (double v : {0.05, 0.1, 0.5, 20.0}) child.Observe(v);  // 0.1 is "le" 0.1.
  EXPECT_THAT(Lines(TextFormat(r.Collect())),
              ElementsAre("# HELP lat_seconds Latency.", "# TYPE lat_seconds histogram",
                          "lat_seconds_bucket{model_name=\"m\",le=\"0.1\"} 2",
                          "lat_seconds_bucket{model_name=\"m\",le=\"1\"} 3",
                          "lat_seconds_bucket{model_name=\"m\",le=\"10\"} 3",
                          "lat_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 4",
                          "lat_seconds_sum{model_name=\"m\"} 20.65",
                          "lat_seconds_count{model_name=\"m\"} 4"));
}

TEST(TextFormatTest, FormatValueRoundTrips) {
  EXPECT_EQ(FormatValue(0.001), "0.001");
  EXPECT_EQ(FormatValue(2560), "2560");
  EXPECT_EQ(FormatValue(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatValue(1.0 / 0.0), "+Inf");
}

TEST(RegistryTest, Buckets125MatchVllm) {
  EXPECT_THAT(Buckets125(100), ElementsAre(1, 2, 5, 10, 20, 50, 100));
  EXPECT_THAT(Buckets125(3000), ElementsAre(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000));
}

TEST(RegistryTest, ChildrenAreStableAndUpdatesFromThreadsAddUp) {
  Registry r;
  CounterFamily& c = r.AddCounter("n_total", "n");
  HistogramFamily& h = r.AddHistogram("h", "h", {}, {1});
  Counter& child = c.Labels({});
  EXPECT_EQ(&child, &c.Labels({}));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        child.Increment();
        h.Labels({}).Observe(0.5);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(child.Value(), 40000);
  EXPECT_EQ(h.Labels({}).Count(), 40000u);
  EXPECT_EQ(h.Labels({}).Sum(), 20000);
}

TEST(RegistryDeathTest, BadNamesAndDuplicatesAreProgrammerErrors) {
  Registry r;
  r.AddGauge("a", "a");
  EXPECT_DEATH(r.AddGauge("a", "again"), "registered twice");
  EXPECT_DEATH(r.AddCounter("requests", "no suffix"), "_total");
  EXPECT_DEATH(r.AddGauge("b", "b", {"le"}), "bad label");
  EXPECT_DEATH(r.AddGauge("9c", "c"), "bad metric name");
  EXPECT_DEATH(r.AddGauge("d", "d", {"x"}).Labels({}), "has labels");
}

}  // namespace
}  // namespace rill::base::metrics
