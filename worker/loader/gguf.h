#ifndef RILL_WORKER_LOADER_GGUF_H_
#define RILL_WORKER_LOADER_GGUF_H_

// Read-only GGUF (v2, v3; little-endian) reader over a memory mapping or an
// in-memory buffer. All strings and tensor data are views into that memory,
// so they stay valid as long as the GgufFile lives.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/ggml_type.h"
#include "worker/loader/mapped_file.h"

namespace rill::worker::loader {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view GgufValueTypeName(GgufValueType type);

// One metadata value. Scalars are decoded; arrays of scalars keep a view of
// their packed little-endian elements (decoded on access), arrays of strings
// and of arrays are decoded eagerly.
class GgufValue {
 public:
  GgufValueType type() const { return type_; }

  // Scalar conversions; std::nullopt on a type mismatch or when the value does
  // not fit. AsInt64/AsUint64 accept every integer type, AsDouble also floats,
  // AsBool only bool.
  std::optional<int64_t> AsInt64() const;
  std::optional<uint64_t> AsUint64() const;
  std::optional<double> AsDouble() const;
  std::optional<bool> AsBool() const;
  std::optional<std::string_view> AsString() const;

  // Arrays (kArray only; size() is 0 otherwise).
  GgufValueType element_type() const { return element_type_; }
  uint64_t size() const { return count_; }
  // Element i as a value (scalar, string or nested array). i < size().
  GgufValue At(uint64_t i) const;

 private:
  friend class GgufParser;

  GgufValueType type_ = GgufValueType::kUint8;
  uint64_t bits_ = 0;        // Scalar payload, zero-extended raw bits.
  std::string_view string_;  // kString.
  GgufValueType element_type_ = GgufValueType::kUint8;
  uint64_t count_ = 0;
  const uint8_t* packed_ = nullptr;  // Scalar-element arrays.
  // Shared so that copies (e.g. from At()) of large arrays stay cheap.
  std::shared_ptr<const std::vector<GgufValue>> elements_;  // String/array elements.
};

struct GgufKv {
  std::string_view key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string_view name;
  kernels::cpu::GgmlType type;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the innermost (row) dim.
  uint64_t offset;          // Relative to GgufFile::data_offset().
  const void* data;         // Into the mapping / buffer.
  size_t nbytes;
};

class GgufFile {
 public:
  // Maps `path` read-only and parses it.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses `data` in place; it must outlive the result. `name` is used as the
  // file name in error messages.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Parse(const uint8_t* data, size_t size,
                                                          std::string name);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const uint8_t* base() const { return base_; }
  size_t size() const { return size_; }
  // MappedFile::ReleasePages on the file's mapping; nothing for a caller's
  // buffer.
  void ReleasePages(const void* p, size_t n) const {
    if (mapping_) mapping_->ReleasePages(p, n);
  }

  const std::vector<GgufKv>& metadata() const { return metadata_; }
  const GgufValue* Find(std::string_view key) const;

  // Typed lookups. NotFound if absent, InvalidArgument (naming the key and the
  // file) on a type mismatch.
  absl::StatusOr<std::string_view> GetString(std::string_view key) const;
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  absl::StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;

 private:
  friend class GgufParser;
  GgufFile() = default;

  std::string path_;
  std::unique_ptr<MappedFile> mapping_;  // Null when parsing a caller's buffer.
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKv> metadata_;
  std::unordered_map<std::string_view, size_t> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace rill::worker::loader

#endif  // RILL_WORKER_LOADER_GGUF_H_
