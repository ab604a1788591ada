// A device allocation that frees itself, with absl::Status errors that name
// what it holds. Thread: whoever owns it (the model's step thread).
#ifndef RILL_WORKER_MODELS_CUDA_DEVICE_BUFFER_H_
#define RILL_WORKER_MODELS_CUDA_DEVICE_BUFFER_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/cuda/cuda_runtime_api.h"

namespace rill::worker {

// Internal error "<what>: <CUDA error name> (code)" for a non-zero code.
inline absl::Status CudaStatus(int err, absl::string_view what) {
  if (err == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "CUDA: ", what, ": ", ::rill::kernels::cuda::ErrorString(err), " (code ", err, ")"));
}

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Free(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Free();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  // Replaces the allocation with `bytes` uninitialized bytes (at least 1, so
  // get() is never null). cudaMalloc aligns to 256 bytes.
  absl::Status Allocate(size_t bytes, absl::string_view what) {
    Free();
    void* p = nullptr;
    const int err = ::rill::kernels::cuda::DeviceAlloc(&p, bytes > 0 ? bytes : 1);
    if (err != 0) {
      return CudaStatus(err, absl::StrCat("allocating ", bytes, " bytes for ", what));
    }
    ptr_ = p;
    bytes_ = bytes;
    return absl::OkStatus();
  }

  // Grows (dropping the contents) when fewer than `bytes` are held. Pointers
  // taken earlier become invalid, so never call it while a captured graph
  // still refers to this buffer.
  absl::Status Reserve(size_t bytes, absl::string_view what) {
    if (ptr_ != nullptr && bytes <= bytes_) return absl::OkStatus();
    return Allocate(bytes, what);
  }

  // Synchronous copy of `bytes` host bytes to the start of the buffer.
  absl::Status Upload(const void* src, size_t bytes, absl::string_view what) {
    if (bytes > bytes_) {
      return absl::InternalError(
          absl::StrCat("upload of ", bytes, " bytes into the ", bytes_, "-byte buffer for ", what));
    }
    if (bytes == 0) return absl::OkStatus();
    return CudaStatus(::rill::kernels::cuda::CopyToDevice(ptr_, src, bytes),
                      absl::StrCat("uploading ", what));
  }

  // Allocates exactly the vector's size and copies it up.
  template <typename T>
  absl::Status AllocateFrom(const std::vector<T>& host, absl::string_view what) {
    absl::Status s = Allocate(host.size() * sizeof(T), what);
    if (s.ok()) s = Upload(host.data(), host.size() * sizeof(T), what);
    return s;
  }

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void Free() {
    if (ptr_ != nullptr)
      ::rill::kernels::cuda::DeviceFree(ptr_);  // nothing to do about a failure here
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_CUDA_DEVICE_BUFFER_H_
