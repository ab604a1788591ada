// Flags shared by the model-running commands: --model, --threads, --backend
// and --kv_cache_dtype are the engine's (engine_flags.h); the matmul choices
// are defined in common_flags.cc.
#ifndef RILL_CLI_COMMON_FLAGS_H_
#define RILL_CLI_COMMON_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"
#include "engine/engine_flags.h"

ABSL_DECLARE_FLAG(bool, exact_matmul);
ABSL_DECLARE_FLAG(bool, int16_kernels);

// --matmul, or what the deprecated --exact_matmul=false (q8) and
// --int16_kernels (int16) ask for, with a warning.
std::string MatmulFlag();

#endif  // RILL_CLI_COMMON_FLAGS_H_
