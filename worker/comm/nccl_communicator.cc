#include "worker/comm/nccl_communicator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/nccl_api.h"

namespace rill::worker {
namespace {

namespace kc = ::rill::kernels::cuda;

absl::Status NcclStatus(int result, absl::string_view what) {
  if (result == 0) return absl::OkStatus();
  std::string message = absl::StrCat(what, ": ", kc::NcclErrorString(result));
  if (result == kc::kNcclUnavailable || result <= -1000) {
    return absl::FailedPreconditionError(message);
  }
  if (result == kc::kNcclTimedOut) return absl::DeadlineExceededError(message);
  return absl::InternalError(message);
}

class NcclCommunicator : public DeviceCommunicator {
 public:
  NcclCommunicator(kc::NcclComm comm, int rank, int world_size)
      : comm_(comm), rank_(rank), world_size_(world_size) {}
  ~NcclCommunicator() override {
    // Destroy waits for queued collectives; a communicator whose peer is gone
    // would wait forever, and the process is exiting then anyway.
    if (kc::NcclCommDestroy(comm_) != 0) kc::NcclCommAbort(comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  const char* backend() const override { return "nccl"; }

  absl::Status AllReduceSumBf16(void* data, int64_t count, kc::Stream stream) override {
    if (count < 0) return absl::InvalidArgumentError("all-reduce of a negative count");
    if (count == 0) return absl::OkStatus();
    return NcclStatus(
        kc::NcclAllReduceSumBf16(data, static_cast<size_t>(count), comm_, stream),
        absl::StrCat("rank ", rank_, ": NCCL all-reduce of ", count, " bf16 values"));
  }

 private:
  kc::NcclComm comm_;
  const int rank_, world_size_;
};

}  // namespace

absl::StatusOr<std::string> NewNcclUniqueId() {
  std::string id(kc::kNcclUniqueIdBytes, '\0');
  if (absl::Status s = NcclStatus(kc::NcclGetUniqueId(id.data()), "NCCL unique id"); !s.ok()) {
    return s;
  }
  return id;
}

std::string NcclVersionString() {
  const int v = kc::NcclVersion();
  if (v < 0) return "none";
  // NCCL_VERSION(X,Y,Z) = X * 10000 + Y * 100 + Z since 2.9.
  return absl::StrCat(v / 10000, ".", v / 100 % 100, ".", v % 100);
}

absl::StatusOr<std::unique_ptr<DeviceCommunicator>> CreateNcclCommunicator(
    const NcclOptions& options) {
  if (options.unique_id.size() != static_cast<size_t>(kc::kNcclUniqueIdBytes)) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL unique id has ", options.unique_id.size(),
                                                   " bytes, not ", kc::kNcclUniqueIdBytes));
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL rank ", options.rank,
                                                   " out of a world of ", options.world_size));
  }
  if (options.device < 0) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA device ", options.device));
  }
  const int64_t ms = options.timeout.count();
  kc::NcclComm comm = nullptr;
  absl::Status s = NcclStatus(
      kc::NcclCommInitRank(&comm, options.unique_id.data(), options.rank, options.world_size,
                           options.device, static_cast<int>(std::min<int64_t>(ms, 1 << 30))),
      absl::StrCat("rank ", options.rank, " of ", options.world_size, " joining NCCL on device ",
                   options.device));
  if (!s.ok()) return s;
  return std::unique_ptr<DeviceCommunicator>(
      new NcclCommunicator(comm, options.rank, options.world_size));
}

}  // namespace rill::worker
