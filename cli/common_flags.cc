#include "cli/common_flags.h"

#include <glog/logging.h>

#include "absl/flags/flag.h"

// --model, --threads, --backend, --kv_cache_dtype and --matmul are engine
// options (engine/engine_options.h), shared with `rill serve` and rill-engine.
ABSL_FLAG(bool, int16_kernels, false, "Deprecated: --matmul=int16.");
ABSL_FLAG(bool, exact_matmul, true, "Deprecated: --exact_matmul=false is --matmul=q8.");

std::string MatmulFlag() {
  // The deprecated flags win only when moved off their defaults, so
  // existing command lines keep their meaning.
  if (absl::GetFlag(FLAGS_int16_kernels)) {
    LOG(WARNING) << "--int16_kernels is deprecated; use --matmul=int16";
    return "int16";
  }
  if (!absl::GetFlag(FLAGS_exact_matmul)) {
    LOG(WARNING) << "--exact_matmul=false is deprecated; use --matmul=q8";
    return "q8";
  }
  return absl::GetFlag(FLAGS_matmul);
}
