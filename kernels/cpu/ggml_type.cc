#include "kernels/cpu/ggml_type.h"

#include <glog/logging.h>

#include <limits>

namespace rill::kernels::cpu {

std::optional<GgmlTypeTraits> GetGgmlTypeTraits(uint32_t type_id) {
  switch (static_cast<GgmlType>(type_id)) {
    case GgmlType::kF32: return GgmlTypeTraits{"f32", 1, 4};
    case GgmlType::kF16: return GgmlTypeTraits{"f16", 1, 2};
    case GgmlType::kQ4_0: return GgmlTypeTraits{"q4_0", 32, 18};
    case GgmlType::kQ4_1: return GgmlTypeTraits{"q4_1", 32, 20};
    case GgmlType::kQ5_0: return GgmlTypeTraits{"q5_0", 32, 22};
    case GgmlType::kQ5_1: return GgmlTypeTraits{"q5_1", 32, 24};
    case GgmlType::kQ8_0: return GgmlTypeTraits{"q8_0", 32, 34};
    case GgmlType::kQ8_1: return GgmlTypeTraits{"q8_1", 32, 36};
    case GgmlType::kQ2_K: return GgmlTypeTraits{"q2_K", 256, 84};
    case GgmlType::kQ3_K: return GgmlTypeTraits{"q3_K", 256, 110};
    case GgmlType::kQ4_K: return GgmlTypeTraits{"q4_K", 256, 144};
    case GgmlType::kQ5_K: return GgmlTypeTraits{"q5_K", 256, 176};
    case GgmlType::kQ6_K: return GgmlTypeTraits{"q6_K", 256, 210};
    case GgmlType::kQ8_K: return GgmlTypeTraits{"q8_K", 256, 292};
    case GgmlType::kI8: return GgmlTypeTraits{"i8", 1, 1};
    case GgmlType::kI16: return GgmlTypeTraits{"i16", 1, 2};
    case GgmlType::kI32: return GgmlTypeTraits{"i32", 1, 4};
    case GgmlType::kI64: return GgmlTypeTraits{"i64", 1, 8};
    case GgmlType::kF64: return GgmlTypeTraits{"f64", 1, 8};
    case GgmlType::kBF16: return GgmlTypeTraits{"bf16", 1, 2};
  }
  return std::nullopt;
}

GgmlTypeTraits GgmlTypeTraitsOf(GgmlType type) {
  std::optional<GgmlTypeTraits> t = GetGgmlTypeTraits(static_cast<uint32_t>(type));
  CHECK(t.has_value()) << "unknown GgmlType " << static_cast<uint32_t>(type);
  return *t;
}

std::string_view GgmlTypeName(GgmlType type) { return GgmlTypeTraitsOf(type).name; }

std::optional<size_t> GgmlTensorBytes(GgmlType type, const int64_t* ne, int n_dims) {
  std::optional<GgmlTypeTraits> t = GetGgmlTypeTraits(static_cast<uint32_t>(type));
  if (!t.has_value()) return std::nullopt;
  // Element counts are bounded by int64 (as in ggml); bytes by size_t.
  uint64_t elements = 1;
  for (int i = 0; i < n_dims; ++i) {
    if (ne[i] < 0) return std::nullopt;
    uint64_t d = static_cast<uint64_t>(ne[i]);
    if (d != 0 && elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / d) {
      return std::nullopt;
    }
    elements *= d;
  }
  if (n_dims > 0 && ne[0] % t->block_size != 0) return std::nullopt;
  uint64_t blocks = elements / static_cast<uint64_t>(t->block_size);
  if (blocks != 0 && t->bytes_per_block > std::numeric_limits<size_t>::max() / blocks) {
    return std::nullopt;
  }
  return static_cast<size_t>(blocks * t->bytes_per_block);
}

}  // namespace rill::kernels::cpu
