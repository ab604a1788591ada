// libFuzzer target: ParseJson on arbitrary bytes; walks the resulting DOM.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/json.h"

namespace {

volatile size_t g_sink;

void Walk(const rill::base::json::JsonValue& v) {
  g_sink = g_sink + v.string_value().size() + v.number_literal().size();
  (void)v.AsInt64();
  (void)v.AsUint64();
  for (const auto& item : v.array_items()) Walk(item);
  for (const auto& m : v.object_members()) {
    g_sink = g_sink + m.first.size();
    Walk(m.second);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto v = rill::base::json::ParseJson(std::string_view(reinterpret_cast<const char*>(data), size));
  if (v.ok()) Walk(*v);
  return 0;
}
