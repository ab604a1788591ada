// Cuts a GGUF checkpoint down to its first `keep_layers` decoder layers:
// every metadata key is copied (with <arch>.block_count rewritten) and every
// tensor except blk.N.* with N >= keep_layers. The default SmolLM2 file
// (98 MB) exceeds what travels to a GPU box (64 MiB); a cut copy keeps real
// weights, so the GPU-vs-CPU comparison stays meaningful.
#ifndef RILL_WORKER_MODELS_CUDA_GGUF_TRIM_H_
#define RILL_WORKER_MODELS_CUDA_GGUF_TRIM_H_

#include <string>

#include "absl/status/status.h"
#include "worker/loader/gguf.h"

namespace rill::worker {

// Writes the cut copy of `in` to `out_path`. InvalidArgument when keep_layers
// is not in [1, block_count] or the file has no general.architecture.
absl::Status WriteTrimmedGguf(const worker::loader::GgufFile& in, int keep_layers,
                              const std::string& out_path);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_CUDA_GGUF_TRIM_H_
