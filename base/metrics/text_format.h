// The Prometheus text exposition format, version 0.0.4: what a /metrics
// endpoint returns (Content-Type kTextContentType).
#ifndef RILL_BASE_METRICS_TEXT_FORMAT_H_
#define RILL_BASE_METRICS_TEXT_FORMAT_H_

#include <string>
#include <vector>

#include "base/metrics/registry.h"

namespace rill::base::metrics {

inline constexpr char kTextContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// # HELP / # TYPE lines, then one line per sample: counters and gauges
// `name{labels} value`, histograms `name_bucket{labels,le="b"}` (cumulative,
// ending at le="+Inf"), `name_sum` and `name_count`. Labels are written in
// the family's declared order.
std::string TextFormat(const std::vector<FamilySnapshot>& families);

// Escaping of the format: HELP text escapes '\' and newline; label values
// also escape '"'.
std::string EscapeHelp(const std::string& help);
std::string EscapeLabelValue(const std::string& value);
// Shortest form that reads back the same double: "0.25", "1e-06", "+Inf".
std::string FormatValue(double v);

}  // namespace rill::base::metrics

#endif  // RILL_BASE_METRICS_TEXT_FORMAT_H_
