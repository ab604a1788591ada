#include "cli/common_flags.h"

#include <glog/logging.h>

#include "absl/flags/flag.h"
#include "kernels/cpu/kernel_plan.h"

ABSL_FLAG(std::string, model, "default",
          "Model: 'default' (SmolLM2-135M-Instruct Q4_1 from the model cache), a .gguf file, "
          "or a Hugging Face directory (config.json + *.safetensors + tokenizer.json).");
ABSL_FLAG(int, threads, 0, "CPU threads for the kernels; 0 = all cores.");
ABSL_FLAG(std::string, backend, "auto", "Compute backend: auto, cpu or cuda.");
ABSL_FLAG(std::string, matmul, "auto", rill::cpu::kMatmulHelp);
ABSL_FLAG(bool, int16_kernels, false, "Deprecated: --matmul=int16.");
ABSL_FLAG(std::string, kv_cache_dtype, "auto",
          "KV cache storage: auto (= float32 on the CPU), float32 or float16 (half the memory "
          "and the bytes long contexts read; logits move by ~1e-3 relative).");
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
