#include "worker/models/tp_slice.h"

#include <glog/logging.h>

#include "kernels/cpu/quant_types.h"

namespace rill::worker {

kernels::cpu::WeightMatrix SliceRows(const kernels::cpu::WeightMatrix& w, int64_t r0, int64_t r1) {
  kernels::cpu::WeightMatrix s = w;
  s.packed = nullptr;  // packed rows are the whole matrix's
  s.rows = r1 - r0;
  s.data = static_cast<const uint8_t*>(w.data) + r0 * w.row_stride_bytes;
  return s;
}

kernels::cpu::WeightMatrix SliceCols(
    const kernels::cpu::WeightMatrix& w, int64_t c0, int64_t c1,
    std::vector<std::unique_ptr<kernels::cpu::AlignedFloats>>* storage) {
  if (c0 == 0 && c1 == w.cols) return w;
  const int64_t block = kernels::cpu::BlockElems(w.type);
  if (c0 % block == 0 && c1 % block == 0) {
    kernels::cpu::WeightMatrix s = w;
    s.packed = nullptr;
    s.cols = c1 - c0;
    s.data = static_cast<const uint8_t*>(w.data) + (c0 / block) * kernels::cpu::BlockBytes(w.type);
    return s;
  }
  // Dequantize whole rows, keep the wanted columns: exact, but f32 bytes
  // (a K-quant's 256-column super-blocks rarely align with a head cut).
  LOG_FIRST_N(INFO, 1) << "tensor parallel: a " << kernels::cpu::GgmlTypeName(w.type)
                       << " matrix's column cut [" << c0 << ", " << c1
                       << ") is not on its " << block
                       << "-column blocks; the slice is kept as f32 (exact, more memory)";
  auto dense = std::make_unique<kernels::cpu::AlignedFloats>((c1 - c0) * w.rows);
  std::vector<float> row(w.cols);
  for (int64_t r = 0; r < w.rows; ++r) {
    kernels::cpu::DequantizeRow(
        w.type, static_cast<const uint8_t*>(w.data) + r * w.row_stride_bytes, row.data(), w.cols);
    std::copy(row.begin() + c0, row.begin() + c1, dense->begin() + r * (c1 - c0));
  }
  kernels::cpu::WeightMatrix s =
      kernels::cpu::MakeWeightMatrix(kernels::cpu::GgmlType::kF32, w.rows, c1 - c0, dense->data());
  s.float_activations = w.float_activations;
  storage->push_back(std::move(dense));
  return s;
}

}  // namespace rill::worker
