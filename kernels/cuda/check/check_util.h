// Helpers for the standalone CUDA checker: device buffers, result rows and
// error metrics. Plain C++ over cuda_runtime_api.h (no CUDA headers).
#ifndef RILL_KERNELS_CUDA_CHECK_CHECK_UTIL_H_
#define RILL_KERNELS_CUDA_CHECK_CHECK_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_runtime_api.h"
#include "kernels/cuda/reference.h"

namespace rill::kernels::cuda::check {

struct Row {
  std::string name;
  bool pass = false;
  double error = 0;    // max error; see `metric`
  std::string metric;  // what `error` measures
  std::string note;
};

// A device copy of a host vector; frees itself. ok() false after any error.
template <typename T>
class DevBuf {
 public:
  explicit DevBuf(size_t n) : n_(n) { err_ = DeviceAlloc(&ptr_, Bytes()); }
  explicit DevBuf(const std::vector<T>& host) : DevBuf(host.size()) { Upload(host); }
  ~DevBuf() {
    if (ptr_) DeviceFree(ptr_);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void Upload(const std::vector<T>& host) {
    if (!err_) err_ = CopyToDevice(ptr_, host.data(), Bytes());
  }
  std::vector<T> Download() {
    std::vector<T> host(n_);
    if (!err_) err_ = CopyToHost(host.data(), ptr_, Bytes());
    return host;
  }
  void PoisonNow() {
    if (!err_) err_ = Poison(ptr_, Bytes(), nullptr);
  }
  T* get() { return static_cast<T*>(ptr_); }
  size_t Bytes() const { return n_ * sizeof(T); }
  int error() const { return err_; }

 private:
  void* ptr_ = nullptr;
  size_t n_;
  int err_ = 0;
};

// Normwise relative error max|gpu - ref| / max|ref| (elementwise relative
// error is meaningless next to zeros); any NaN in gpu gives +inf.
inline double MaxRelError(const std::vector<float>& gpu, const std::vector<float>& ref) {
  double num = 0, den = 1e-12;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (i >= gpu.size() || std::isnan(gpu[i])) return INFINITY;
    num = std::max(num, static_cast<double>(std::fabs(gpu[i] - ref[i])));
    den = std::max(den, static_cast<double>(std::fabs(ref[i])));
  }
  return num / den;
}

inline double MaxRelError(const std::vector<ref::Bf16>& gpu, const std::vector<ref::Bf16>& r) {
  return MaxRelError(ref::ToFloat(gpu), ref::ToFloat(r));
}

// Tolerance for outputs rounded to bf16 once (8 mantissa bits, plus slack for
// float-order differences in the reductions).
constexpr double kBf16Tol = 1.6e-2;

inline std::vector<ref::Bf16> RandomBf16(std::mt19937& rng, size_t n, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<ref::Bf16> v(n);
  for (auto& x : v) x = ref::ToBf16(d(rng));
  return v;
}

inline Row Compared(const std::string& name, double err, double tol, const std::string& note = "") {
  return {name, err <= tol, err, "max rel err", note};
}

inline Row Failed(const std::string& name, const std::string& why) {
  return {name, false, INFINITY, "error", why};
}

}  // namespace rill::kernels::cuda::check

#endif  // RILL_KERNELS_CUDA_CHECK_CHECK_UTIL_H_
