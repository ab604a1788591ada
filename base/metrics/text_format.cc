#include "base/metrics/text_format.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace rill::base::metrics {
namespace {

std::string Escape(const std::string& s, bool quote) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="x",b="y"}` with an optional extra label last; "" without labels.
std::string LabelSet(const std::vector<std::string>& names, const std::vector<std::string>& values,
                     const std::string& extra_name = "", const std::string& extra_value = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&out, out.empty() ? "" : ",", names[i], "=\"", EscapeLabelValue(values[i]),
                    "\"");
  }
  if (!extra_name.empty()) {
    absl::StrAppend(&out, out.empty() ? "" : ",", extra_name, "=\"", extra_value, "\"");
  }
  return out.empty() ? out : absl::StrCat("{", out, "}");
}

}  // namespace

std::string EscapeHelp(const std::string& help) { return Escape(help, /*quote=*/false); }
std::string EscapeLabelValue(const std::string& value) { return Escape(value, /*quote=*/true); }

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Integers (token counts, request counts) print without a decimal point.
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrCat(static_cast<int64_t>(v));
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string TextFormat(const std::vector<FamilySnapshot>& families) {
  std::string out;
  for (const FamilySnapshot& f : families) {
    absl::StrAppend(&out, "# HELP ", f.name, " ", EscapeHelp(f.help), "\n");
    absl::StrAppend(&out, "# TYPE ", f.name, " ", MetricTypeName(f.type), "\n");
    for (const FamilySnapshot::Child& c : f.children) {
      if (f.type != MetricType::kHistogram) {
        absl::StrAppend(&out, f.name, LabelSet(f.label_names, c.label_values), " ",
                        FormatValue(c.value), "\n");
        continue;
      }
      const Histogram::Snapshot& h = c.histogram;
      for (size_t i = 0; i < h.cumulative.size(); ++i) {
        const std::string le = i < h.bounds.size() ? FormatValue(h.bounds[i]) : "+Inf";
        absl::StrAppend(&out, f.name, "_bucket", LabelSet(f.label_names, c.label_values, "le", le),
                        " ", h.cumulative[i], "\n");
      }
      const std::string labels = LabelSet(f.label_names, c.label_values);
      absl::StrAppend(&out, f.name, "_sum", labels, " ", FormatValue(h.sum), "\n");
      absl::StrAppend(&out, f.name, "_count", labels, " ", h.count, "\n");
    }
  }
  return out;
}

}  // namespace rill::base::metrics
