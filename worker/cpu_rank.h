// A tensor-parallel rank on the CPU: its shard of the CausalLm
// (worker/models/tp_plan.h), a paged KV cache of the engine's num_blocks and
// an all-reduce over gloo among the ranks (none at world size 1).
#ifndef RILL_WORKER_CPU_RANK_H_
#define RILL_WORKER_CPU_RANK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "rill/internal/worker.pb.h"
#include "worker/rank_model.h"

namespace rill::worker {

// Joins the gloo group, loads the shard and allocates the KV cache.
// InvalidArgument for a bad configuration; the loader's, gloo's and the
// model's errors as they come.
absl::StatusOr<std::unique_ptr<RankModel>> CreateCpuRank(
    int rank, const rill::internal::WorkerConfig& config);

}  // namespace rill::worker

#endif  // RILL_WORKER_CPU_RANK_H_
