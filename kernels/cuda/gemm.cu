// BF16 GEMMs through cuBLAS with FP32 accumulation. The handle and a fixed
// workspace are set up once so the calls can be captured in CUDA graphs.
#include <cublas_v2.h>

#include "kernels/cuda/cuda_device_common.h"
#include "kernels/cuda/cuda_kernels.h"

namespace rill::kernels::cuda {

struct GemmContext {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
};

namespace {
constexpr size_t kWorkspaceBytes = 32u << 20;
constexpr int kCublasBase = 1000;  // cuBLAS status s is returned as 1000 + s
}  // namespace

int GemmCreate(Stream stream, GemmContext** out) {
  auto* ctx = new GemmContext;
  *out = nullptr;
  cublasStatus_t st = cublasCreate(&ctx->handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    delete ctx;
    return kCublasBase + st;
  }
  cudaError_t e = cudaMalloc(&ctx->workspace, kWorkspaceBytes);
  if (e == cudaSuccess) {
    st = cublasSetStream(ctx->handle, static_cast<cudaStream_t>(stream));
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasSetWorkspace(ctx->handle, ctx->workspace, kWorkspaceBytes);
    if (st == CUBLAS_STATUS_SUCCESS) {
      *out = ctx;
      return 0;
    }
  }
  GemmDestroy(ctx);
  return e != cudaSuccess ? internal::Err(e) : kCublasBase + st;
}

void GemmDestroy(GemmContext* ctx) {
  if (!ctx) return;
  if (ctx->handle) cublasDestroy(ctx->handle);
  if (ctx->workspace) cudaFree(ctx->workspace);
  delete ctx;
}

int Gemm(GemmContext* ctx, const void* x, const void* w, void* y, int m, int n, int k,
         bool y_is_f32) {
  if (!ctx || m < 0 || n <= 0 || k <= 0) return internal::kInvalid;
  if (m == 0) return 0;
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major y[m][n] is column-major y^T[n][m] = w[n][k] . x^T[k][m].
  cublasStatus_t st = cublasGemmEx(
      ctx->handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, CUDA_R_16BF, k, x, CUDA_R_16BF, k,
      &beta, y, y_is_f32 ? CUDA_R_32F : CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return st == CUBLAS_STATUS_SUCCESS ? 0 : kCublasBase + st;
}

}  // namespace rill::kernels::cuda
