#include "worker/models/cuda/gguf_trim.h"

#include <cstring>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "worker/loader/gguf_writer.h"

namespace rill::worker {
namespace {

using worker::loader::GgufValue;
using worker::loader::GgufValueType;

template <typename T>
std::string Pod(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

// The value's bytes after its type tag, as GGUF stores them (little-endian).
std::string Encode(const GgufValue& v) {
  switch (v.type()) {
    case GgufValueType::kUint8:
      return Pod(static_cast<uint8_t>(*v.AsUint64()));
    case GgufValueType::kInt8:
      return Pod(static_cast<int8_t>(*v.AsInt64()));
    case GgufValueType::kUint16:
      return Pod(static_cast<uint16_t>(*v.AsUint64()));
    case GgufValueType::kInt16:
      return Pod(static_cast<int16_t>(*v.AsInt64()));
    case GgufValueType::kUint32:
      return Pod(static_cast<uint32_t>(*v.AsUint64()));
    case GgufValueType::kInt32:
      return Pod(static_cast<int32_t>(*v.AsInt64()));
    case GgufValueType::kUint64:
      return Pod(static_cast<uint64_t>(*v.AsUint64()));
    case GgufValueType::kInt64:
      return Pod(static_cast<int64_t>(*v.AsInt64()));
    // float -> double -> float is exact.
    case GgufValueType::kFloat32:
      return Pod(static_cast<float>(*v.AsDouble()));
    case GgufValueType::kFloat64:
      return Pod(*v.AsDouble());
    case GgufValueType::kBool:
      return Pod<uint8_t>(*v.AsBool() ? 1 : 0);
    case GgufValueType::kString:
      return worker::loader::GgufWriter::EncodeString(std::string(*v.AsString()));
    case GgufValueType::kArray: {
      std::vector<std::string> elems;
      elems.reserve(v.size());
      for (uint64_t i = 0; i < v.size(); ++i) elems.push_back(Encode(v.At(i)));
      return worker::loader::GgufWriter::EncodeArray(v.element_type(), elems);
    }
  }
  return "";
}

// The layer index of a "blk.N...." tensor name, or -1.
int LayerOf(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  name.remove_prefix(4);
  const size_t dot = name.find('.');
  int n = -1;
  if (dot == std::string_view::npos) return -1;
  const std::string digits(name.substr(0, dot));
  if (!absl::SimpleAtoi(digits, &n)) return -1;
  return n;
}

}  // namespace

absl::Status WriteTrimmedGguf(const worker::loader::GgufFile& in, int keep_layers,
                              const std::string& out_path) {
  absl::StatusOr<std::string_view> arch = in.GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  const std::string count_key = absl::StrCat(std::string(*arch), ".block_count");
  absl::StatusOr<int64_t> layers = in.GetInt(count_key);
  if (!layers.ok()) return layers.status();
  if (keep_layers < 1 || keep_layers > *layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("keep_layers ", keep_layers, " outside [1, ", *layers, "]"));
  }
  worker::loader::GgufWriter w(in.version());
  w.SetAlignment(static_cast<uint32_t>(in.alignment()));
  for (const worker::loader::GgufKv& kv : in.metadata()) {
    const std::string key(kv.key);
    if (key == "general.alignment") continue;  // SetAlignment wrote it
    if (key == count_key) {
      // Same type as the original, new value.
      GgufValueType t = kv.value.type();
      std::string enc = t == GgufValueType::kUint32   ? Pod(static_cast<uint32_t>(keep_layers))
                        : t == GgufValueType::kInt32  ? Pod(static_cast<int32_t>(keep_layers))
                        : t == GgufValueType::kUint64 ? Pod(static_cast<uint64_t>(keep_layers))
                                                      : Pod(static_cast<int64_t>(keep_layers));
      if (t != GgufValueType::kUint32 && t != GgufValueType::kInt32 &&
          t != GgufValueType::kUint64) {
        t = GgufValueType::kInt64;
      }
      w.AddRaw(key, t, std::move(enc));
      continue;
    }
    w.AddRaw(key, kv.value.type(), Encode(kv.value));
  }
  for (const worker::loader::GgufTensorInfo& t : in.tensors()) {
    if (LayerOf(t.name) >= keep_layers) continue;
    w.AddTensor(std::string(t.name), t.type, t.ne,
                std::string(static_cast<const char*>(t.data), t.nbytes));
  }
  return w.WriteFile(out_path);
}

}  // namespace rill::worker
