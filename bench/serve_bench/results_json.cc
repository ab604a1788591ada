#include "bench/serve_bench/results_json.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace rill::bench {
namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out + "\"";
}

std::string Dist(const Distribution& d) {
  return absl::StrFormat(
      "{\"count\":%d,\"mean_ms\":%.4f,\"p50_ms\":%.4f,\"p90_ms\":%.4f,\"p99_ms\":%.4f,\"max_ms\":%.4f}",
      d.count, d.mean, d.p50, d.p90, d.p99, d.max);
}

}  // namespace

std::string ResultsToJson(const std::string& backend, const std::string& address,
                          const std::string& workload, const std::vector<LevelResult>& levels,
                          const std::string& slo) {
  std::vector<std::string> items;
  for (const LevelResult& l : levels) {
    const RunSummary& s = l.summary;
    std::vector<std::string> errs;
    for (const std::string& e : s.first_errors) errs.push_back(Quote(e));
    items.push_back(absl::StrFormat(
        "{\"concurrency\":%d,\"request_rate\":%.4f,\"completed\":%d,\"errors\":%d,"
        "\"first_errors\":[%s],\"duration_s\":%.4f,\"input_tokens\":%d,\"output_tokens\":%d,"
        "\"request_throughput\":%.4f,\"input_tokens_per_s\":%.4f,\"output_tokens_per_s\":%.4f,"
        "\"ttft\":%s,\"tpot\":%s,\"itl\":%s,\"e2e\":%s%s}",
        l.concurrency, l.request_rate, s.completed, s.errors, absl::StrJoin(errs, ","),
        s.duration_s, s.input_tokens, s.output_tokens, s.request_throughput,
        s.input_tokens_per_s, s.output_tokens_per_s, Dist(s.ttft), Dist(s.tpot), Dist(s.itl),
        Dist(s.e2e),
        l.goodput ? absl::StrFormat(",\"goodput\":{\"slo_met\":%d,\"goodput\":%.4f,"
                                    "\"attainment\":%.4f}",
                                    l.goodput->met, l.goodput->goodput, l.goodput->attainment)
                  : ""));
  }
  return absl::StrCat("{\"backend\":", Quote(backend), ",\"address\":", Quote(address),
                      ",\"workload\":", Quote(workload),
                      slo.empty() ? "" : absl::StrCat(",\"slo\":", Quote(slo)), ",\"levels\":[",
                      absl::StrJoin(items, ","), "]}\n");
}

std::string ResultsToTable(const std::string& backend, const std::vector<LevelResult>& levels) {
  std::string out = absl::StrFormat(
      "%-12s %5s %6s %4s %9s %9s %9s %9s %9s %9s %9s %9s\n", "backend", "conc", "done", "err",
      "req/s", "out tok/s", "ttft p50", "ttft p99", "tpot p50", "itl p50", "itl p99", "e2e p99");
  for (const LevelResult& l : levels) {
    const RunSummary& s = l.summary;
    out += absl::StrFormat("%-12s %5d %6d %4d %9.3f %9.1f %9.1f %9.1f %9.2f %9.2f %9.2f %9.0f\n",
                           backend, l.concurrency, s.completed, s.errors, s.request_throughput,
                           s.output_tokens_per_s, s.ttft.p50, s.ttft.p99, s.tpot.p50, s.itl.p50,
                           s.itl.p99, s.e2e.p99);
  }
  bool any_goodput = false;
  for (const LevelResult& l : levels) {
    if (!l.goodput) continue;
    if (!any_goodput) {
      out += absl::StrFormat("%-12s %5s %9s %9s %9s\n", "", "conc", "slo met", "goodput",
                             "attain %");
      any_goodput = true;
    }
    out += absl::StrFormat("%-12s %5d %9d %9.3f %9.1f\n", backend, l.concurrency, l.goodput->met,
                           l.goodput->goodput, 100 * l.goodput->attainment);
  }
  return out + (any_goodput ? "(latencies in ms; goodput in requests/s meeting every SLO)\n"
                            : "(latencies in ms)\n");
}

}  // namespace rill::bench
