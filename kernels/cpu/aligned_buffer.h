// Float scratch buffers aligned to 64 bytes. MatMul's AVX-512 path copies
// activations that are not 64-byte aligned (a zmm load straddling two cache
// lines costs two); model scratch kept in these needs no copy.
#ifndef RILL_KERNELS_CPU_ALIGNED_BUFFER_H_
#define RILL_KERNELS_CPU_ALIGNED_BUFFER_H_

#include <cstddef>
#include <new>
#include <vector>

namespace rill::kernels::cpu {

template <typename T>
struct Aligned64Allocator {
  using value_type = T;
  Aligned64Allocator() = default;
  template <typename U>
  Aligned64Allocator(const Aligned64Allocator<U>&) {}  // NOLINT: allocator rebind
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{64}); }
  template <typename U>
  bool operator==(const Aligned64Allocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const Aligned64Allocator<U>&) const {
    return false;
  }
};

using AlignedFloats = std::vector<float, Aligned64Allocator<float>>;

}  // namespace rill::kernels::cpu

#endif  // RILL_KERNELS_CPU_ALIGNED_BUFFER_H_
