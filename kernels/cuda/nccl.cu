// nccl_api.h over NCCL.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "kernels/cuda/nccl_api.h"

namespace rill::kernels::cuda {
namespace {
static_assert(kNcclUniqueIdBytes == NCCL_UNIQUE_ID_BYTES, "NCCL unique id size changed");
int R(ncclResult_t r) { return static_cast<int>(r); }
ncclComm_t C(NcclComm c) { return static_cast<ncclComm_t>(c); }
cudaStream_t S(Stream s) { return static_cast<cudaStream_t>(s); }
}  // namespace

const char* NcclErrorString(int result) {
  if (result == kNcclUnavailable) return "this build has no NCCL";
  if (result == kNcclTimedOut) return "not every rank joined the NCCL communicator in time";
  if (result <= -1000) return cudaGetErrorString(static_cast<cudaError_t>(-1000 - result));
  return ncclGetErrorString(static_cast<ncclResult_t>(result));
}

int NcclVersion() {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess ? v : kNcclUnavailable;
}

int NcclGetUniqueId(char* id) {
  ncclUniqueId uid;
  ncclResult_t r = ncclGetUniqueId(&uid);
  if (r == ncclSuccess) std::memcpy(id, uid.internal, NCCL_UNIQUE_ID_BYTES);
  return R(r);
}

int NcclCommInitRank(NcclComm* comm, const char* id, int rank, int world_size, int device,
                     int timeout_ms) {
  *comm = nullptr;
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return -1000 - static_cast<int>(e);
  }
  ncclUniqueId uid;
  std::memcpy(uid.internal, id, NCCL_UNIQUE_ID_BYTES);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // poll below, so a missing peer times out
  ncclComm_t c = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&c, world_size, uid, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (c != nullptr) ncclCommAbort(c);
    return R(r);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t q = ncclCommGetAsyncError(c, &state);
    if (q != ncclSuccess) state = q;
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) {
      ncclCommAbort(c);
      return R(state);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ncclCommAbort(c);
      return kNcclTimedOut;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  *comm = c;
  return 0;
}

// A non-blocking communicator may answer ncclInProgress for a queued
// collective; wait for it to be enqueued so callers see plain success.
static int Settle(ncclComm_t c, ncclResult_t r) {
  while (r == ncclInProgress) {
    if (ncclCommGetAsyncError(c, &r) != ncclSuccess) return R(ncclInternalError);
    if (r == ncclInProgress) std::this_thread::yield();
  }
  return R(r);
}

int NcclAllReduceSumBf16(void* data, size_t count, NcclComm comm, Stream stream) {
  return Settle(C(comm), ncclAllReduce(data, data, count, ncclBfloat16, ncclSum, C(comm), S(stream)));
}

int NcclAllReduceSumF32(float* data, size_t count, NcclComm comm, Stream stream) {
  return Settle(C(comm), ncclAllReduce(data, data, count, ncclFloat32, ncclSum, C(comm), S(stream)));
}

int NcclCommDestroy(NcclComm comm) {
  if (comm == nullptr) return 0;
  ncclComm_t c = C(comm);
  // A non-blocking communicator must finish its queued work first.
  int r = Settle(c, ncclCommFinalize(c));
  ncclResult_t d = ncclCommDestroy(c);
  return r != 0 ? r : R(d);
}

int NcclCommAbort(NcclComm comm) { return comm == nullptr ? 0 : R(ncclCommAbort(C(comm))); }

}  // namespace rill::kernels::cuda
