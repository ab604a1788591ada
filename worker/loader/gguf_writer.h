#ifndef RILL_WORKER_LOADER_GGUF_WRITER_H_
#define RILL_WORKER_LOADER_GGUF_WRITER_H_

// Test-only: builds small GGUF files in memory (tensor data padded to the
// alignment, as llama.cpp writes them).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/ggml_type.h"
#include "worker/loader/gguf.h"

namespace rill::worker::loader {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  // Value encoders (the bytes that follow the type tag), for nested arrays.
  static std::string EncodeString(const std::string& s);
  static std::string EncodeArray(GgufValueType element_type, const std::vector<std::string>& encoded);

  // Adds a KV whose value bytes are already encoded.
  void AddRaw(const std::string& key, GgufValueType type, std::string encoded_value);
  void AddUint8(const std::string& key, uint8_t v);
  void AddInt8(const std::string& key, int8_t v);
  void AddUint16(const std::string& key, uint16_t v);
  void AddInt16(const std::string& key, int16_t v);
  void AddUint32(const std::string& key, uint32_t v);
  void AddInt32(const std::string& key, int32_t v);
  void AddUint64(const std::string& key, uint64_t v);
  void AddInt64(const std::string& key, int64_t v);
  void AddFloat32(const std::string& key, float v);
  void AddFloat64(const std::string& key, double v);
  void AddBool(const std::string& key, bool v);
  void AddString(const std::string& key, const std::string& v);
  void AddStringArray(const std::string& key, const std::vector<std::string>& v);
  void AddInt32Array(const std::string& key, const std::vector<int32_t>& v);
  void AddBoolArray(const std::string& key, const std::vector<bool>& v);
  void AddFloat32Array(const std::string& key, const std::vector<float>& v);
  // Also writes general.alignment.
  void SetAlignment(uint32_t alignment);

  // `data` must have exactly the size the type and shape need.
  void AddTensor(const std::string& name, kernels::cpu::GgmlType type,
                 const std::vector<int64_t>& ne, std::string data);
  // Convenience: F32 tensor with the given values (count must match ne).
  void AddF32Tensor(const std::string& name, const std::vector<int64_t>& ne,
                    const std::vector<float>& values);

  std::string Build() const;
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    kernels::cpu::GgmlType type;
    std::vector<int64_t> ne;
    std::string data;
  };
  uint32_t version_;
  uint32_t alignment_ = 32;
  std::vector<std::string> kvs_;  // Encoded key + type + value.
  std::vector<Tensor> tensors_;
};

// Writes `bytes` to `path` (test helper shared by the writers).
absl::Status WriteBytesToFile(const std::string& path, const std::string& bytes);

}  // namespace rill::worker::loader

#endif  // RILL_WORKER_LOADER_GGUF_WRITER_H_
