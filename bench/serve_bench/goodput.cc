#include "bench/serve_bench/goodput.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/serve_bench/run_summary.h"

namespace rill::bench {

std::string SloSpec::ToString() const {
  std::vector<std::string> parts;
  auto add = [&parts](const char* key, const std::optional<double>& v) {
    if (v) parts.push_back(absl::StrCat(key, ":", *v));
  };
  add("ttft_ms", ttft_ms);
  add("tpot_ms", tpot_ms);
  add("itl_ms", itl_ms);
  add("e2e_ms", e2e_ms);
  return absl::StrJoin(parts, " ");
}

absl::StatusOr<SloSpec> ParseSloSpec(absl::string_view spec) {
  SloSpec out;
  for (absl::string_view part : absl::StrSplit(spec, absl::ByAnyChar(", "), absl::SkipEmpty())) {
    const std::vector<absl::string_view> kv = absl::StrSplit(part, ':');
    double value = 0;
    if (kv.size() != 2 || !absl::SimpleAtod(kv[1], &value) || !(value > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--goodput: '", part, "' is not key:milliseconds with a positive number"));
    }
    std::optional<double>* slot = kv[0] == "ttft_ms"   ? &out.ttft_ms
                                  : kv[0] == "tpot_ms" ? &out.tpot_ms
                                  : kv[0] == "itl_ms"  ? &out.itl_ms
                                  : kv[0] == "e2e_ms"  ? &out.e2e_ms
                                                       : nullptr;
    if (slot == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--goodput: unknown SLO '", kv[0], "' (use ttft_ms, tpot_ms, itl_ms or e2e_ms)"));
    }
    if (slot->has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("--goodput: '", kv[0], "' given twice"));
    }
    *slot = value;
  }
  if (out.empty()) return absl::InvalidArgumentError("--goodput: no SLO given");
  return out;
}

double RequestItlP90Seconds(const RequestRecord& r) {
  std::vector<double> gaps;
  for (size_t i = 1; i < r.chunk_times_s.size(); ++i) {
    const int n = std::max(1, r.chunk_tokens[i]);
    const double gap = (r.chunk_times_s[i] - r.chunk_times_s[i - 1]) / n;
    for (int k = 0; k < n; ++k) gaps.push_back(gap);
  }
  return Percentile(std::move(gaps), 90);
}

bool MeetsSlo(const RequestRecord& r, const SloSpec& slo) {
  if (!r.ok) return false;
  if (slo.ttft_ms && (r.chunk_times_s.empty() || 1e3 * r.ttft_s() > *slo.ttft_ms)) return false;
  if (slo.tpot_ms && 1e3 * r.tpot_s() > *slo.tpot_ms) return false;
  if (slo.itl_ms && 1e3 * RequestItlP90Seconds(r) > *slo.itl_ms) return false;
  if (slo.e2e_ms && 1e3 * r.e2e_s() > *slo.e2e_ms) return false;
  return true;
}

GoodputSummary ComputeGoodput(const std::vector<RequestRecord>& records, const SloSpec& slo,
                              double duration_s) {
  GoodputSummary g;
  for (const RequestRecord& r : records) g.met += MeetsSlo(r, slo) ? 1 : 0;
  if (duration_s > 0) g.goodput = static_cast<double>(g.met) / duration_s;
  if (!records.empty()) g.attainment = static_cast<double>(g.met) / static_cast<double>(records.size());
  return g;
}

}  // namespace rill::bench
