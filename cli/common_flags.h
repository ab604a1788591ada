// Flags shared by the model-running commands (defined in common_flags.cc).
#ifndef RILL_CLI_COMMON_FLAGS_H_
#define RILL_CLI_COMMON_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(std::string, backend);
ABSL_DECLARE_FLAG(std::string, matmul);
ABSL_DECLARE_FLAG(std::string, kv_cache_dtype);

// --matmul, or what the deprecated --exact_matmul=false (q8) and
// --int16_kernels (int16) ask for, with a warning.
std::string MatmulFlag();

#endif  // RILL_CLI_COMMON_FLAGS_H_
