#include "cli/common_flags.h"

#include "absl/flags/flag.h"

// --model, --threads, --backend and --kv_cache_dtype are engine options
// (engine/engine_options.h), shared with `rill serve` and rill-engine.
ABSL_FLAG(bool, int16_kernels, false,
          "With --exact_matmul: repack Q4_0/Q4_1/Q8_0 weights for the int16 VNNI kernels "
          "(AVX-512 VNNI CPUs; ~1.5-2x faster, logits ~1e-4 from the float64 reference).");
ABSL_FLAG(bool, exact_matmul, true,
          "true: f32 activations against quantized weights (matches the float64 reference); "
          "false: 8-bit activations and integer dot products, as llama.cpp (faster prefill).");
