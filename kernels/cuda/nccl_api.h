// Plain-C++ wrappers over NCCL, so callers need neither NCCL nor CUDA headers
// (as cuda_runtime_api.h does for the runtime). Every call returns 0 on
// success or an ncclResult_t value; NcclErrorString() names it. Builds
// without the toolkit get nccl_without_cuda.cc, whose calls all return
// kNcclUnavailable.
#ifndef RILL_KERNELS_CUDA_NCCL_API_H_
#define RILL_KERNELS_CUDA_NCCL_API_H_

#include <cstddef>

#include "kernels/cuda/cuda_runtime_api.h"

namespace rill::kernels::cuda {

using NcclComm = void*;  // ncclComm_t

// NCCL_UNIQUE_ID_BYTES: the opaque id every rank of one communicator shares.
inline constexpr int kNcclUniqueIdBytes = 128;
// Returned by every call of a build without NCCL.
inline constexpr int kNcclUnavailable = -1;
// Returned by NcclCommInitRank when the ranks did not all join in time.
inline constexpr int kNcclTimedOut = -2;

const char* NcclErrorString(int result);
// NCCL's version code (22809 for 2.28.9), or kNcclUnavailable.
int NcclVersion();

// Writes a fresh id (kNcclUniqueIdBytes bytes) to `id`. Needs no GPU: it
// opens the bootstrap listener the ranks will reach.
int NcclGetUniqueId(char* id);

// Makes `device` the calling thread's device (cudaSetDevice, whose error
// comes back as -1000 - cudaError_t so it is not mistaken for an NCCL code),
// then joins the `world_size` ranks that share `id` as rank `rank`. The join
// is non-blocking underneath: after `timeout_ms` without every rank joined
// the half-made communicator is aborted and kNcclTimedOut returned, so a
// missing peer never hangs the caller.
int NcclCommInitRank(NcclComm* comm, const char* id, int rank, int world_size, int device,
                     int timeout_ms);

// In-place sum of `count` bfloat16 values across the ranks, queued on
// `stream` (capturable into a CUDA graph). Every rank ends with the same bits.
int NcclAllReduceSumBf16(void* data, size_t count, NcclComm comm, Stream stream);
// The same for float32.
int NcclAllReduceSumF32(float* data, size_t count, NcclComm comm, Stream stream);

// Frees the communicator after its queued work finished (ncclCommDestroy);
// NcclCommAbort frees it at once, abandoning queued work (a peer is gone).
int NcclCommDestroy(NcclComm comm);
int NcclCommAbort(NcclComm comm);

}  // namespace rill::kernels::cuda

#endif  // RILL_KERNELS_CUDA_NCCL_API_H_
