// nccl_api.h for builds without the CUDA toolkit: every call says so.
#include "kernels/cuda/nccl_api.h"

namespace rill::kernels::cuda {

const char* NcclErrorString(int result) {
  if (result == kNcclUnavailable) return "this build has no NCCL (built without the CUDA toolkit)";
  if (result == kNcclTimedOut) return "not every rank joined the NCCL communicator in time";
  return "NCCL error";
}
int NcclVersion() { return kNcclUnavailable; }
int NcclGetUniqueId(char*) { return kNcclUnavailable; }
int NcclCommInitRank(NcclComm* comm, const char*, int, int, int, int) {
  *comm = nullptr;
  return kNcclUnavailable;
}
int NcclAllReduceSumBf16(void*, size_t, NcclComm, Stream) { return kNcclUnavailable; }
int NcclAllReduceSumF32(float*, size_t, NcclComm, Stream) { return kNcclUnavailable; }
int NcclCommDestroy(NcclComm) { return 0; }
int NcclCommAbort(NcclComm) { return 0; }

}  // namespace rill::kernels::cuda
