#include "cli/common_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, model, "default",
          "Model: 'default' (SmolLM2-135M-Instruct Q4_1 from the model cache), a .gguf file, "
          "or a Hugging Face directory (config.json + *.safetensors + tokenizer.json).");
ABSL_FLAG(int, threads, 0, "CPU threads for the kernels; 0 = all cores.");
ABSL_FLAG(std::string, backend, "auto", "Compute backend: auto, cpu or cuda.");
ABSL_FLAG(bool, int16_kernels, false,
          "With --exact_matmul: repack Q4_0/Q4_1/Q8_0 weights for the int16 VNNI kernels "
          "(AVX-512 VNNI CPUs; ~1.5-2x faster, logits ~1e-4 from the float64 reference).");
ABSL_FLAG(std::string, kv_cache_dtype, "auto",
          "KV cache storage: auto (= float32 on the CPU), float32 or float16 (half the memory "
          "and the bytes long contexts read; logits move by ~1e-3 relative).");
ABSL_FLAG(bool, exact_matmul, true,
          "true: f32 activations against quantized weights (matches the float64 reference); "
          "false: 8-bit activations and integer dot products, as llama.cpp (faster prefill).");
