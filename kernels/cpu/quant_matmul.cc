#include "kernels/cpu/quant_matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_internal.h"

namespace rill::kernels::cpu {
namespace {

using internal::ActKind;
using internal::RowKernel;

// Rows per work item: a chunk's weights (16 rows of <= a few KiB) stay in
// L1/L2 while every token tile of the call streams past them.
constexpr int64_t kRowChunk = 16;
// Activation bytes per token block of the exact path's chunk kernels (a
// quarter of a 1 MiB L2 (half of a 512 KiB one), leaving room for the weight
// panels and the outputs).
constexpr int64_t kTokenBlockBytes = int64_t{256} << 10;

// The exact path's chunk kernel for w on this CPU; nullptr when MatMul
// takes another path (packed weights, q8 activations, no AVX2, a type
// without one).
internal::ChunkKernel ChunkKernelFor(const WeightMatrix& w) {
  if (w.packed || !w.float_activations || !UseAvx2()) return nullptr;
  return UseAvx512() ? internal::Avx512ChunkF32Act(w.type) : internal::Avx2ChunkF32Act(w.type);
}

// The chunk kernels over several matrices that share x (all have a chunk
// kernel and the same cols), in one parallel region per token block: each
// chunk of rows meets every token of the call at once (the kernel expands
// its weights once for the whole batch), and a layer's q/k/v or gate/up cost
// one pool barrier instead of one each.
void ChunkMatMul(const MatMulTarget* targets, int count, const float* x, int64_t n_tokens,
                 ThreadPool* pool) {
  const int64_t cols = targets[0].w->cols;
  // 64-byte aligned activations (a copy when the caller's are not): a
  // vector load that straddles two cache lines costs two loads.
  const float* xa = x;
  thread_local std::vector<float> x_buf;
  if (reinterpret_cast<uintptr_t>(x) % 64 != 0 || (cols * sizeof(float)) % 64 != 0) {
    x_buf.resize(n_tokens * cols + 16);
    float* dst =
        reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(x_buf.data()) + 63) & ~uintptr_t{63});
    std::memcpy(dst, x, n_tokens * cols * sizeof(float));
    xa = dst;
  }
  // Chunks of all the matrices, numbered one after another.
  internal::ChunkKernel kernels[kMaxSharedTargets];
  int64_t first_chunk[kMaxSharedTargets + 1];
  first_chunk[0] = 0;
  for (int i = 0; i < count; ++i) {
    kernels[i] = ChunkKernelFor(*targets[i].w);
    first_chunk[i + 1] = first_chunk[i] + (targets[i].w->rows + kRowChunk - 1) / kRowChunk;
  }
  // Every row piece streams all the call's activations past its weights,
  // so a long prefill runs in token blocks whose activations stay in L2
  // (4096 tokens x 576 columns is 9 MiB: re-read from L3 by each of 36
  // pieces otherwise). Each (row, token) is computed the same way in any
  // block, so the results do not change.
  const int64_t block = std::max<int64_t>(
      24, kTokenBlockBytes / (cols * static_cast<int64_t>(sizeof(float))) / 6 * 6);
  for (int64_t t0 = 0; t0 < n_tokens; t0 += block) {
    const int64_t nt = std::min(block, n_tokens - t0);
    const float* xt = xa + t0 * cols;
    internal::ForRowPieces(pool, first_chunk[count], nt, [&](int64_t cb, int64_t ce) {
      int i = 0;
      for (int64_t c = cb; c < ce; ++c) {
        while (c >= first_chunk[i + 1]) ++i;
        const WeightMatrix& w = *targets[i].w;
        const int64_t r0 = (c - first_chunk[i]) * kRowChunk;
        const int64_t nr = std::min(w.rows, r0 + kRowChunk) - r0;
        kernels[i](static_cast<const uint8_t*>(w.data) + r0 * w.row_stride_bytes,
                   w.row_stride_bytes, nr, xt, nt, cols, targets[i].y + t0 * w.rows + r0, w.rows);
      }
    });
  }
}

// Logs, once per type and process, that `type` runs the exact kernels on
// the int16 plan (load time only; every matrix of the type says the same).
void LogInt16FallbackOnce(GgmlType type) {
  static std::atomic<uint64_t> logged{0};
  const uint64_t bit = uint64_t{1} << (static_cast<unsigned>(type) % 64);
  if (logged.fetch_or(bit) & bit) return;
  LOG(INFO) << "matmul int16: " << GgmlTypeName(type)
            << " weights have no int16 kernels; they run the exact path's interleaved kernels "
               "(f32 activations)";
}

}  // namespace

WeightMatrix MakeWeightMatrix(GgmlType type, int64_t rows, int64_t cols, const void* data) {
  WeightMatrix w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  w.data = data;
  w.row_stride_bytes = RowBytes(type, cols);
  return w;
}

absl::Status ValidateWeightMatrix(const WeightMatrix& w) {
  if (!CanDequantize(w.type)) {
    return absl::InvalidArgumentError(absl::StrCat("MatMul: unsupported weight type ",
                                                   std::string(GgmlTypeName(w.type))));
  }
  if (w.rows <= 0 || w.cols <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("MatMul: bad shape ", w.rows, "x", w.cols));
  }
  if (w.cols % BlockElems(w.type) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("MatMul: cols ", w.cols, " not a multiple of ",
                                                   std::string(GgmlTypeName(w.type)), " block ",
                                                   BlockElems(w.type)));
  }
  if (w.row_stride_bytes < RowBytes(w.type, w.cols)) {
    return absl::InvalidArgumentError("MatMul: row stride shorter than a row");
  }
  if (w.data == nullptr) return absl::InvalidArgumentError("MatMul: null data");
  return absl::OkStatus();
}

bool PackForCpu(WeightMatrix* w) {
  if (!w->float_activations || w->packed || !PackedKernelsAvailable()) return false;
  w->packed = PackWeights(w->type, w->rows, w->cols, w->data, w->row_stride_bytes);
  return w->packed != nullptr;
}

bool PackForInterleavedKernels(WeightMatrix* w) {
  if (!w->float_activations || w->packed || !UseAvx2()) return false;
  w->packed = PackWeightsInterleaved(w->type, w->rows, w->cols, w->data, w->row_stride_bytes);
  return w->packed != nullptr;
}

bool PackForKernelPlan(const KernelPlan& plan, WeightMatrix* w) {
  switch (plan.matmul) {
    case MatmulKind::kInt16:
      if (PackForCpu(w)) return true;
      // No int16 kernels for this type (Q5_x, the K-quants): the exact
      // path's interleaved kernels, rather than its slow fallback.
      if (!PackForInterleavedKernels(w)) return false;
      LogInt16FallbackOnce(w->type);
      return true;
    case MatmulKind::kExact: return plan.interleaved && PackForInterleavedKernels(w);
    case MatmulKind::kQ8: return false;
  }
  return false;
}

void MatMulShared(const MatMulTarget* targets, int count, const float* x, int64_t n_tokens,
                  ThreadPool* pool, const uint8_t* precise) {
  CHECK_LE(count, kMaxSharedTargets);
  if (n_tokens <= 0 || count <= 0) return;
  bool together = true, interleaved = true;
  for (int i = 0; i < count; ++i) {
    const WeightMatrix& w = *targets[i].w;
    DCHECK(ValidateWeightMatrix(w).ok()) << ValidateWeightMatrix(w);
    const bool same_cols = w.cols == targets[0].w->cols;
    together = together && ChunkKernelFor(w) != nullptr && same_cols;
    interleaved = interleaved && same_cols && w.packed && IsInterleavedFormat(w.packed->format);
  }
  if (together) {
    ChunkMatMul(targets, count, x, n_tokens, pool);
    return;
  }
  if (interleaved) {
    const PackedWeights* ws[kMaxSharedTargets];
    float* ys[kMaxSharedTargets];
    for (int i = 0; i < count; ++i) {
      ws[i] = targets[i].w->packed.get();
      ys[i] = targets[i].y;
    }
    internal::InterleavedMatMul(ws, ys, count, x, n_tokens, pool);
    return;
  }
  for (int i = 0; i < count; ++i) MatMul(*targets[i].w, x, n_tokens, targets[i].y, pool, precise);
}

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool) {
  MatMul(w, x, n_tokens, y, pool, nullptr);
}

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool,
            const uint8_t* precise) {
  if (n_tokens <= 0) return;
  if (w.packed) {
    DCHECK(w.packed->rows == w.rows && w.packed->cols == w.cols) << "stale packed weights";
    PackedMatMul(*w.packed, x, n_tokens, y, pool, precise);
    return;
  }
  DCHECK(ValidateWeightMatrix(w).ok()) << ValidateWeightMatrix(w);
  const bool avx2 = UseAvx2();
  if (ChunkKernelFor(w)) {
    const MatMulTarget target{&w, y};
    ChunkMatMul(&target, 1, x, n_tokens, pool);
    return;
  }
  RowKernel kernel = avx2 ? internal::Avx2Kernel(w.type) : internal::ScalarKernel(w.type);
  if (w.float_activations && w.type != GgmlType::kF32 && w.type != GgmlType::kF16 &&
      w.type != GgmlType::kBF16) {
    // Exact path without a chunk kernel: dequantize, then dot (below).
    kernel = nullptr;
  }
  const ActKind kind =
      kernel && !w.float_activations ? internal::ActKindFor(w.type) : ActKind::kF32;

  // Activations in the kernel's format; for F32 the input is used as is.
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  const size_t act_stride = internal::ActRowBytes(kind, w.cols);
  thread_local std::vector<uint8_t> act_buf;
  if (kind != ActKind::kF32) {
    act_buf.resize(act_stride * n_tokens);
    uint8_t* buf = act_buf.data();
    const int64_t cols = w.cols;
    ParallelFor(pool, n_tokens, 8, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        internal::QuantizeActRow(kind, x + t * cols, buf + t * act_stride, cols, avx2);
      }
    });
    act = buf;
  }

  const uint8_t* wdata = static_cast<const uint8_t*>(w.data);
  const size_t out_stride = w.rows;
  const int64_t n_chunks = (w.rows + kRowChunk - 1) / kRowChunk;
  if (!kernel) {
    // Float path: each chunk of rows is dequantized once and then meets every
    // token, so the dequantization cost is shared by the whole batch.
    RowKernel fkernel =
        avx2 ? internal::Avx2Kernel(GgmlType::kF32) : internal::ScalarKernel(GgmlType::kF32);
    ParallelFor(pool, n_chunks, 1, [&](int64_t cb, int64_t ce) {
      thread_local std::vector<float> rows;
      for (int64_t c = cb; c < ce; ++c) {
        const int64_t r0 = c * kRowChunk;
        const int64_t r1 = std::min(w.rows, r0 + kRowChunk);
        rows.resize((r1 - r0) * w.cols);
        for (int64_t r = r0; r < r1; ++r) {
          DequantizeRow(w.type, wdata + r * w.row_stride_bytes, rows.data() + (r - r0) * w.cols,
                        w.cols);
        }
        for (int64_t t0 = 0; t0 < n_tokens; t0 += internal::kMaxTile) {
          const int nt = static_cast<int>(std::min<int64_t>(internal::kMaxTile, n_tokens - t0));
          for (int64_t r = r0; r < r1; ++r) {
            fkernel(reinterpret_cast<const uint8_t*>(rows.data() + (r - r0) * w.cols),
                    act + t0 * act_stride, act_stride, nt, w.cols, y + t0 * out_stride + r,
                    out_stride);
          }
        }
      }
    });
    return;
  }
  internal::ForRowPieces(pool, n_chunks, n_tokens, [&](int64_t cb, int64_t ce) {
    const int64_t r0 = cb * kRowChunk;
    const int64_t r1 = std::min(w.rows, ce * kRowChunk);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += internal::kMaxTile) {
      const int nt = static_cast<int>(std::min<int64_t>(internal::kMaxTile, n_tokens - t0));
      const uint8_t* a = act + t0 * act_stride;
      float* out = y + t0 * out_stride;
      for (int64_t r = r0; r < r1; ++r) {
        kernel(wdata + r * w.row_stride_bytes, a, act_stride, nt, w.cols, out + r, out_stride);
      }
    }
  });
}

}  // namespace rill::kernels::cpu
