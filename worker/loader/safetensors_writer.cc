#include "worker/loader/safetensors_writer.h"

#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace rill::worker::loader {

void SafetensorsWriter::AddTensor(const std::string& name, const std::string& dtype,
                                  const std::vector<int64_t>& shape, std::string data) {
  tensors_.push_back({name, dtype, shape, std::move(data)});
}

void SafetensorsWriter::AddF32Tensor(const std::string& name, const std::vector<int64_t>& shape,
                                     const std::vector<float>& values) {
  std::string data(values.size() * 4, '\0');
  std::memcpy(data.data(), values.data(), data.size());
  AddTensor(name, "F32", shape, std::move(data));
}

std::string SafetensorsWriter::Build() const {
  // Names in tests are plain ASCII without quotes/backslashes; no escaping.
  std::string header = "{";
  bool first = true;
  if (!metadata_.empty()) {
    header += "\"__metadata__\":{";
    bool f2 = true;
    for (const auto& [k, v] : metadata_) {
      absl::StrAppend(&header, f2 ? "" : ",", "\"", k, "\":\"", v, "\"");
      f2 = false;
    }
    header += "}";
    first = false;
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    absl::StrAppend(&header, first ? "" : ",", "\"", t.name, "\":{\"dtype\":\"", t.dtype,
                    "\",\"shape\":[");
    for (size_t i = 0; i < t.shape.size(); ++i) absl::StrAppend(&header, i ? "," : "", t.shape[i]);
    absl::StrAppend(&header, "],\"data_offsets\":[", offset, ",", offset + t.data.size(), "]}");
    offset += t.data.size();
    first = false;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out += header;
  for (const Tensor& t : tensors_) out += t.data;
  return out;
}

absl::Status SafetensorsWriter::WriteFile(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  std::string bytes = Build();
  f.write(bytes.data(), bytes.size());
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace rill::worker::loader
