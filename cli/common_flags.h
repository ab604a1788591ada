// Flags shared by the model-running commands (defined in common_flags.cc).
#ifndef RILL_CLI_COMMON_FLAGS_H_
#define RILL_CLI_COMMON_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(std::string, backend);
ABSL_DECLARE_FLAG(bool, exact_matmul);
ABSL_DECLARE_FLAG(bool, int16_kernels);
ABSL_DECLARE_FLAG(std::string, kv_cache_dtype);

#endif  // RILL_CLI_COMMON_FLAGS_H_
