#ifndef RILL_WORKER_LOADER_CHECKPOINT_INTERNAL_H_
#define RILL_WORKER_LOADER_CHECKPOINT_INTERNAL_H_

// Private to //worker/loader:checkpoint — the per-format loaders.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/loader/checkpoint.h"

namespace rill::worker::loader {

struct CheckpointBuilder {
  static absl::StatusOr<std::unique_ptr<Checkpoint>> LoadGguf(const std::string& path);
  static absl::StatusOr<std::unique_ptr<Checkpoint>> LoadHf(const std::string& dir);
  // Checks config sanity and the presence/shape of every tensor the
  // architecture needs.
  static absl::Status Validate(const Checkpoint& c);
  // Phi-3 only (GPT-2's attn_qkv stays fused): blk.N.attn_qkv and
  // blk.N.ffn_gate_up become attn_q/k/v and ffn_gate/up, row ranges of the
  // fused tensor (rows are whole quant blocks, so no copy) sized from the
  // config. Errors name the tensor.
  static absl::Status SplitFusedProjections(Checkpoint* c);
  static std::unique_ptr<Checkpoint> New() { return std::unique_ptr<Checkpoint>(new Checkpoint()); }
};

}  // namespace rill::worker::loader

#endif  // RILL_WORKER_LOADER_CHECKPOINT_INTERNAL_H_
