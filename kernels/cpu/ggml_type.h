// ggml's tensor element types (ids as stored in GGUF files) and one traits
// table (name, elements and bytes per block). The loader reads and checks
// tensors with it; the kernels lay out and convert blocks of the same enum
// (quant_types.h), so there is one type id from the file to the kernel.
#ifndef RILL_KERNELS_CPU_GGML_TYPE_H_
#define RILL_KERNELS_CPU_GGML_TYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rill::kernels::cpu {

// Tensor element types with ggml's numeric ids (as stored in GGUF files).
// Not all of them run in the kernels: see CanDequantize (quant_types.h).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

struct GgmlTypeTraits {
  std::string_view name;   // ggml's name, e.g. "q4_K".
  int64_t block_size;      // Elements per block (1 for plain types).
  size_t bytes_per_block;  // Bytes per block (the element size for plain types).
};

// Traits of a known type id, std::nullopt for ids this table does not know.
std::optional<GgmlTypeTraits> GetGgmlTypeTraits(uint32_t type_id);
// CHECK-fails on an unknown enum value (programmer error).
GgmlTypeTraits GgmlTypeTraitsOf(GgmlType type);
std::string_view GgmlTypeName(GgmlType type);

// Bytes for a tensor with shape `ne` (ggml order) of `type`; std::nullopt when
// ne[0] is not a multiple of the block size, a dim is negative, or the size
// overflows size_t / int64.
std::optional<size_t> GgmlTensorBytes(GgmlType type, const int64_t* ne, int n_dims);

}  // namespace rill::kernels::cpu

#endif  // RILL_KERNELS_CPU_GGML_TYPE_H_
