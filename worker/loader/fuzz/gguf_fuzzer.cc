// libFuzzer target: GgufFile::Parse on arbitrary bytes, then touch everything
// a parsed file exposes so out-of-range views are caught by ASan.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "worker/loader/gguf.h"

namespace {

volatile uint8_t g_sink;

void Touch(const rill::worker::loader::GgufValue& v) {
  using rill::worker::loader::GgufValueType;
  if (v.type() == GgufValueType::kString) {
    std::string_view s = *v.AsString();
    if (!s.empty()) g_sink = s.front() ^ s.back();
  } else if (v.type() == GgufValueType::kArray) {
    for (uint64_t i = 0; i < v.size(); ++i) Touch(v.At(i));
  } else {
    (void)v.AsInt64();
    (void)v.AsDouble();
    (void)v.AsBool();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Exact-size heap copy so reads past the end hit ASan's redzone.
  std::vector<uint8_t> buf(data, data + size);
  auto f = rill::worker::loader::GgufFile::Parse(buf.data(), buf.size(), "fuzz.gguf");
  if (!f.ok()) return 0;
  for (const auto& kv : (*f)->metadata()) {
    if (!kv.key.empty()) g_sink = kv.key.front() ^ kv.key.back();
    Touch(kv.value);
  }
  for (const auto& t : (*f)->tensors()) {
    if (t.nbytes > 0) {
      const uint8_t* p = static_cast<const uint8_t*>(t.data);
      g_sink = p[0] ^ p[t.nbytes - 1];
    }
  }
  (void)(*f)->GetStringArray("tokenizer.ggml.tokens");
  (void)(*f)->GetFloatArray("tokenizer.ggml.scores");
  (void)(*f)->GetIntArray("tokenizer.ggml.token_type");
  return 0;
}
