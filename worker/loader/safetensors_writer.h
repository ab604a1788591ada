#ifndef RILL_WORKER_LOADER_SAFETENSORS_WRITER_H_
#define RILL_WORKER_LOADER_SAFETENSORS_WRITER_H_

// Test-only: builds small safetensors files in memory.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace rill::worker::loader {

class SafetensorsWriter {
 public:
  // `dtype` is the safetensors name ("F32", "F16", "BF16", or anything else to
  // test rejection); `shape` row-major as stored.
  void AddTensor(const std::string& name, const std::string& dtype,
                 const std::vector<int64_t>& shape, std::string data);
  void AddF32Tensor(const std::string& name, const std::vector<int64_t>& shape,
                    const std::vector<float>& values);
  void AddMetadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

  // The header is space-padded so the data starts 8-byte aligned.
  std::string Build() const;
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::string data;
  };
  std::vector<Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace rill::worker::loader

#endif  // RILL_WORKER_LOADER_SAFETENSORS_WRITER_H_
