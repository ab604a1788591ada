#include "base/tracing/trace_context.h"

#include <cstdint>
#include <random>

#include "absl/strings/str_cat.h"

namespace rill::base::tracing {
namespace {

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool AllZero(std::string_view s) { return s.find_first_not_of('0') == std::string_view::npos; }

std::string RandomHex(int digits) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  do {
    out.clear();
    while (static_cast<int>(out.size()) < digits) {
      uint64_t bits = rng();
      for (int i = 0; i < 16 && static_cast<int>(out.size()) < digits; ++i, bits >>= 4) {
        out.push_back(kHex[bits & 0xf]);
      }
    }
  } while (AllZero(out));
  return out;
}

}  // namespace

std::optional<TraceContext> ParseTraceparent(std::string_view h) {
  // version(2) - trace-id(32) - parent-id(16) - flags(2) = 55 characters.
  constexpr size_t kLength = 55;
  if (h.size() < kLength || h[2] != '-' || h[35] != '-' || h[52] != '-') return std::nullopt;
  const std::string_view version = h.substr(0, 2);
  const std::string_view trace_id = h.substr(3, 32);
  const std::string_view span_id = h.substr(36, 16);
  const std::string_view flags = h.substr(53, 2);
  if (!IsLowerHex(version) || !IsLowerHex(trace_id) || !IsLowerHex(span_id) || !IsLowerHex(flags)) {
    return std::nullopt;
  }
  if (version == "ff") return std::nullopt;
  // Version 00 has exactly these fields; a later version may append "-...".
  if (version == "00" ? h.size() != kLength : (h.size() > kLength && h[kLength] != '-')) {
    return std::nullopt;
  }
  if (AllZero(trace_id) || AllZero(span_id)) return std::nullopt;
  TraceContext ctx;
  ctx.trace_id = std::string(trace_id);
  ctx.span_id = std::string(span_id);
  const int flag_bits = std::stoi(std::string(flags), nullptr, 16);
  ctx.sampled = (flag_bits & 1) != 0;
  return ctx;
}

std::string FormatTraceparent(std::string_view trace_id, std::string_view span_id, bool sampled) {
  return "00-" + std::string(trace_id) + "-" + std::string(span_id) + (sampled ? "-01" : "-00");
}

std::string NewTraceId() { return RandomHex(32); }
std::string NewSpanId() { return RandomHex(16); }

}  // namespace rill::base::tracing
