#ifndef RILL_WORKER_LOADER_SAFETENSORS_H_
#define RILL_WORKER_LOADER_SAFETENSORS_H_

// Read-only reader of the safetensors format: an 8-byte little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets}, __metadata__},
// then the data. Only F32, F16 and BF16 tensors are supported.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/ggml_type.h"
#include "worker/loader/mapped_file.h"

namespace rill::worker::loader {

struct SafetensorsTensor {
  std::string name;
  kernels::cpu::GgmlType type;  // kF32, kF16 or kBF16.
  std::vector<int64_t> shape;  // As stored: row-major, outermost first.
  const void* data;            // Into the mapping / buffer.
  size_t nbytes;
};

class SafetensorsFile {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Parses `data` in place; it must outlive the result. `name` is used in
  // error messages.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Parse(const uint8_t* data, size_t size,
                                                                std::string name);

  const std::string& path() const { return path_; }
  // Sorted by data offset (file order).
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  absl::Status ParseInternal(const uint8_t* data, size_t size);

  std::string path_;
  std::unique_ptr<MappedFile> mapping_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint split over several files. With `model.safetensors.index.json`
// in `dir`, its weight_map decides which file holds each tensor; otherwise
// `model.safetensors`, otherwise every *.safetensors file in `dir`.
class SafetensorsShards {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsShards>> Open(const std::string& dir);

  const SafetensorsTensor* Find(std::string_view name) const;
  // All tensors, by name.
  const std::map<std::string, const SafetensorsTensor*>& tensors() const { return tensors_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  SafetensorsShards() = default;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsTensor*> tensors_;
};

}  // namespace rill::worker::loader

#endif  // RILL_WORKER_LOADER_SAFETENSORS_H_
