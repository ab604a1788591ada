// libFuzzer target: SafetensorsFile::Parse on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "worker/loader/safetensors.h"

namespace {
volatile uint8_t g_sink;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> buf(data, data + size);
  auto f = rill::worker::loader::SafetensorsFile::Parse(buf.data(), buf.size(), "fuzz.safetensors");
  if (!f.ok()) return 0;
  for (const auto& t : (*f)->tensors()) {
    if (t.nbytes > 0) {
      const uint8_t* p = static_cast<const uint8_t*>(t.data);
      g_sink = p[0] ^ p[t.nbytes - 1];
    }
  }
  return 0;
}
