#include "worker/loader/gguf_writer.h"

#include <glog/logging.h>

#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace rill::worker::loader {
namespace {

template <typename T>
std::string Pod(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

}  // namespace

std::string GgufWriter::EncodeString(const std::string& s) {
  return Pod<uint64_t>(s.size()) + s;
}

std::string GgufWriter::EncodeArray(GgufValueType element_type,
                                    const std::vector<std::string>& encoded) {
  std::string out = Pod<uint32_t>(static_cast<uint32_t>(element_type)) + Pod<uint64_t>(encoded.size());
  for (const std::string& e : encoded) out += e;
  return out;
}

void GgufWriter::AddRaw(const std::string& key, GgufValueType type, std::string encoded_value) {
  kvs_.push_back(EncodeString(key) + Pod<uint32_t>(static_cast<uint32_t>(type)) + encoded_value);
}

void GgufWriter::AddUint8(const std::string& k, uint8_t v) { AddRaw(k, GgufValueType::kUint8, Pod(v)); }
void GgufWriter::AddInt8(const std::string& k, int8_t v) { AddRaw(k, GgufValueType::kInt8, Pod(v)); }
void GgufWriter::AddUint16(const std::string& k, uint16_t v) { AddRaw(k, GgufValueType::kUint16, Pod(v)); }
void GgufWriter::AddInt16(const std::string& k, int16_t v) { AddRaw(k, GgufValueType::kInt16, Pod(v)); }
void GgufWriter::AddUint32(const std::string& k, uint32_t v) { AddRaw(k, GgufValueType::kUint32, Pod(v)); }
void GgufWriter::AddInt32(const std::string& k, int32_t v) { AddRaw(k, GgufValueType::kInt32, Pod(v)); }
void GgufWriter::AddUint64(const std::string& k, uint64_t v) { AddRaw(k, GgufValueType::kUint64, Pod(v)); }
void GgufWriter::AddInt64(const std::string& k, int64_t v) { AddRaw(k, GgufValueType::kInt64, Pod(v)); }
void GgufWriter::AddFloat32(const std::string& k, float v) { AddRaw(k, GgufValueType::kFloat32, Pod(v)); }
void GgufWriter::AddFloat64(const std::string& k, double v) { AddRaw(k, GgufValueType::kFloat64, Pod(v)); }
void GgufWriter::AddBool(const std::string& k, bool v) {
  AddRaw(k, GgufValueType::kBool, Pod<uint8_t>(v ? 1 : 0));
}
void GgufWriter::AddString(const std::string& k, const std::string& v) {
  AddRaw(k, GgufValueType::kString, EncodeString(v));
}

void GgufWriter::AddStringArray(const std::string& key, const std::vector<std::string>& v) {
  std::vector<std::string> enc;
  for (const std::string& s : v) enc.push_back(EncodeString(s));
  AddRaw(key, GgufValueType::kArray, EncodeArray(GgufValueType::kString, enc));
}

void GgufWriter::AddInt32Array(const std::string& key, const std::vector<int32_t>& v) {
  std::vector<std::string> enc;
  for (int32_t x : v) enc.push_back(Pod(x));
  AddRaw(key, GgufValueType::kArray, EncodeArray(GgufValueType::kInt32, enc));
}

void GgufWriter::AddBoolArray(const std::string& key, const std::vector<bool>& v) {
  std::vector<std::string> enc;
  for (bool x : v) enc.push_back(Pod<uint8_t>(x ? 1 : 0));
  AddRaw(key, GgufValueType::kArray, EncodeArray(GgufValueType::kBool, enc));
}

void GgufWriter::AddFloat32Array(const std::string& key, const std::vector<float>& v) {
  std::vector<std::string> enc;
  for (float x : v) enc.push_back(Pod(x));
  AddRaw(key, GgufValueType::kArray, EncodeArray(GgufValueType::kFloat32, enc));
}

void GgufWriter::SetAlignment(uint32_t alignment) {
  alignment_ = alignment;
  AddUint32("general.alignment", alignment);
}

void GgufWriter::AddTensor(const std::string& name, kernels::cpu::GgmlType type,
                           const std::vector<int64_t>& ne, std::string data) {
  std::optional<size_t> n =
      kernels::cpu::GgmlTensorBytes(type, ne.data(), static_cast<int>(ne.size()));
  CHECK(n.has_value() && *n == data.size()) << "tensor " << name << ": data size " << data.size();
  tensors_.push_back({name, type, ne, std::move(data)});
}

void GgufWriter::AddF32Tensor(const std::string& name, const std::vector<int64_t>& ne,
                              const std::vector<float>& values) {
  std::string data(values.size() * 4, '\0');
  std::memcpy(data.data(), values.data(), data.size());
  AddTensor(name, kernels::cpu::GgmlType::kF32, ne, std::move(data));
}

std::string GgufWriter::Build() const {
  std::string out = "GGUF" + Pod<uint32_t>(version_) + Pod<uint64_t>(tensors_.size()) +
                    Pod<uint64_t>(kvs_.size());
  for (const std::string& kv : kvs_) out += kv;
  uint64_t offset = 0;
  auto pad = [&](uint64_t x) { return (alignment_ - x % alignment_) % alignment_; };
  for (const Tensor& t : tensors_) {
    out += EncodeString(t.name) + Pod<uint32_t>(t.ne.size());
    for (int64_t d : t.ne) out += Pod<uint64_t>(d);
    out += Pod<uint32_t>(static_cast<uint32_t>(t.type)) + Pod<uint64_t>(offset);
    offset += t.data.size() + pad(t.data.size());
  }
  if (!tensors_.empty()) out.append(pad(out.size()), '\0');
  for (const Tensor& t : tensors_) {
    out += t.data;
    out.append(pad(t.data.size()), '\0');
  }
  return out;
}

absl::Status WriteBytesToFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), bytes.size());
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  return WriteBytesToFile(path, Build());
}

}  // namespace rill::worker::loader
