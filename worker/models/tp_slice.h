// A rank's share of a weight matrix. Rows (column-parallel layers) are a
// zero-copy view. Columns (row-parallel layers) are a zero-copy view when the
// cut falls on quantization-block boundaries (the kernels honour
// row_stride_bytes); otherwise the slice is dequantized to f32 once at load.
#ifndef RILL_WORKER_MODELS_TP_SLICE_H_
#define RILL_WORKER_MODELS_TP_SLICE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/quant_matmul.h"

namespace rill::worker {

// Rows [r0, r1) of w.
kernels::cpu::WeightMatrix SliceRows(const kernels::cpu::WeightMatrix& w, int64_t r0, int64_t r1);

// Columns [c0, c1) of w; copies it owns go in *storage (kept by the model).
kernels::cpu::WeightMatrix SliceCols(
    const kernels::cpu::WeightMatrix& w, int64_t c0, int64_t c1,
    std::vector<std::unique_ptr<kernels::cpu::AlignedFloats>>* storage);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_TP_SLICE_H_
