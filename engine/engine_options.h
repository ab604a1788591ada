// Every option a user sets on an engine, declared once:
//   X(type, name, default, check, help)
// Types are spelled in full: the flags are declared at global scope.
// `name` is both the EngineArgs field and the flag (--name) of rill-engine
// and `rill serve`; `check` is a validator from base/option_checks.h, run by
// ValidateEngineArgs; `help` is what --help prints. From this list come the
// EngineArgs fields (engine_args.h), the absl flags and EngineArgs filled
// from them (engine_flags.h), the validation and the options the config RPC
// reports, so adding an option here is all it takes to expose it.
#ifndef RILL_ENGINE_ENGINE_OPTIONS_H_
#define RILL_ENGINE_ENGINE_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "base/option_checks.h"
#include "engine/lora_adapters.h"
#include "kernels/cpu/kernel_plan.h"

// clang-format off
#define RILL_ENGINE_OPTIONS(X)                                                                      \
  X(std::string, model, "default", base::AnyValue(),                                                \
    "Model: 'default' (SmolLM2-135M-Instruct Q4_1 from the model cache), a .gguf file, or a "       \
    "Hugging Face directory (config.json + *.safetensors + tokenizer.json).")                       \
  X(std::string, backend, "auto", base::OneOf("auto", "cpu", "cuda"),                               \
    "Where the model runs: cpu; cuda (the Llama family, bf16 weights and KV cache: on GPU 0 in "    \
    "this process, or one GPU per rill-worker rank over NCCL with --tensor_parallel_size > 1 or "   \
    "--distributed_executor_backend=mp); "                                                            \
    "or auto (cuda when a device is usable and the model runs there, else cpu, with the reason "    \
    "logged).")                                                                                     \
  X(int, threads, 0, base::AtLeast(0),                                                              \
    "Compute threads; 0 = all cores. cpu: kernel threads; cuda: host sampling threads.")            \
  X(std::string, matmul, "auto", base::OneOf("auto", "exact", "int16", "q8"), rill::kernels::cpu::kMatmulHelp) \
  X(double, gpu_memory_utilization, 0.9, base::Fraction(),                                          \
    "cuda: share of the GPU's memory for weights, activations and the KV cache, in (0, 1]; the "    \
    "KV cache gets what is left (--kv_cache_mb does not apply).")                                   \
  X(bool, device_sampling, true, base::AnyValue(),                                                  \
    "cuda: sample on the GPU, so only token ids (and their logprobs) come back; rows it cannot "    \
    "sample as the host would (grammars, drafts to verify, prompt logprobs) stay on the host. "     \
    "false: every row's logits come back and the host samples them all.")                         \
  X(int, tensor_parallel_size, 1, base::AtLeast(1),                                                 \
    "> 1 runs the model in that many rill-worker processes (tensor-parallel ranks): over gloo on "  \
    "the CPU, over NCCL with one GPU per rank on cuda (the engine process then needs no GPU).")     \
  X(std::string, distributed_executor_backend, "auto", base::OneOf("auto", "uni", "mp"),          \
    "Where the model runs: uni (in the engine process; tensor_parallel_size 1 only), mp "          \
    "(rill-worker processes, one per rank, even for one rank: on cuda that rank joins NCCL, "     \
    "so one GPU runs the tensor-parallel path end to end), or auto (uni for one rank, else mp).") \
  X(std::string, cuda_devices, "", base::AnyValue(),                                               \
    "cuda with rill-worker ranks: each rank's CUDA device, comma-separated (e.g. 2,3); empty: "    \
    "rank r on device r, or what an external worker sees (device 0 of a one-GPU container, or "   \
    "its --cuda_device).")                                                                         \
  X(std::string, worker_binary, "", base::AnyValue(),                                               \
    "Path of rill-worker; empty = next to the running binary.")                                     \
  X(std::string, external_workers_dir, "", base::AnyValue(),                                        \
    "Do not start workers: wait for --tensor_parallel_size rill-worker processes (e.g. "            \
    "containers of this pod) on <dir>/control.sock.")                                               \
  X(int, max_num_seqs, 64, base::AtLeast(1), "Most requests running at once.")                      \
  X(int, max_num_batched_tokens, 2048, base::AtLeast(1), "Most tokens per engine step.")            \
  X(int, target_itl_ms, 0, base::AtLeast(0),                                                      \
    "Target inter-token latency in ms; 0 = off. When set, each step's prefill chunks are sized " \
    "online from the step times the engine measures (at most --max_num_batched_tokens) so "      \
    "running decodes keep this latency while long prompts are prefilled in pieces; "             \
    "speculative drafts get only the step time left.")                                           \
  X(int, target_ttft_ms, 0, base::AtLeast(0),                                                     \
    "Target time to first token in ms (needs --target_itl_ms); 0 = none. A prompt that can "     \
    "still meet it only with bigger chunks gets them.")                                           \
  X(int64_t, kv_cache_mb, 512, base::AtLeast(1), "CPU KV cache size in MiB.")                       \
  X(std::string, kv_cache_dtype, "auto", base::AnyValue(),                                          \
    "KV cache storage: auto (= float32 on the CPU, bfloat16 on cuda), float32, or float16 "         \
    "(twice the tokens in the same --kv_cache_mb; logits move by ~1e-3 relative).")                 \
  X(int64_t, max_model_len, 0, base::AtLeast(0),                                                    \
    "Longest sequence (prompt + output) in tokens; 0: the model's context length.")                 \
  X(bool, enable_prefix_caching, true, base::AnyValue(), "Reuse KV blocks of shared prompt prefixes.") \
  X(bool, free_out_of_window_kv_blocks, true, base::AnyValue(),                                   \
    "Models whose every layer has a sliding window (Mistral, Phi-3): release a sequence's KV "     \
    "blocks once they fall out of the window, so its cache stays bounded by the window.")          \
  X(absl::Duration, log_stats_interval, absl::ZeroDuration(), base::AnyValue(),                     \
    "Log engine stats this often (e.g. 10s); 0 disables.")                                          \
  X(bool, log_requests, false, base::AnyValue(),                                                    \
    "Log one line per finished request (tokens, cached tokens, queue time, TTFT, e2e, finish "      \
    "reason, LoRA).")                                                                               \
  X(std::string, otlp_traces_endpoint, "", base::HttpUrlOrEmpty(),                                  \
    "Export request spans (queue, prefill, decode; children of the frontend's llm_request) "        \
    "over OTLP/HTTP JSON to <url>/v1/traces, e.g. http://127.0.0.1:4318; empty = off. "             \
    "`rill serve` passes it to its frontends too.")                                                 \
  X(::rill::engine::LoraAdapters, lora, {}, base::AnyValue(),                                       \
    "LoRA adapters to load at start-up: name=path,name=path (PEFT directories).")                   \
  X(std::string, lora_root, "", base::AnyValue(),                                                   \
    "Admin.AddLora paths must be under this directory; empty refuses AddLora.")                     \
  X(std::string, lora_registry_file, "", base::AnyValue(),                                          \
    "Adapters added with Admin.AddLora are listed in this file (rewritten on every "                \
    "AddLora/RemoveLora) and registered again when the engine restarts; empty: not kept.")          \
  X(int, max_loras, 4, base::AtLeast(1),                                                            \
    "Most distinct LoRA adapters among running requests (one batch).")                              \
  X(int, max_lora_rank, 64, base::AtLeast(1), "LoRA adapters of a higher rank are refused.")        \
  X(int, max_cpu_loras, 16, base::AtLeast(1),                                                       \
    "LoRA adapters kept in memory (LRU); others reload on use; at least --max_loras.")              \
  X(int, structured_output_compile_threads, 1, base::AtLeast(1),                                    \
    "Threads compiling structured-output constraints (JSON schema, regex, grammar, choice) "        \
    "off the engine loop; compiled grammars are cached by constraint.")                             \
  X(absl::Duration, structured_output_compile_timeout, absl::Seconds(10), base::AnyValue(),         \
    "A request whose constraint takes longer to compile fails with INVALID_ARGUMENT.")              \
  X(int64_t, structured_output_max_bytes, 65536, base::AtLeast(1),                                  \
    "Largest constraint (schema, regex, grammar, all choices together) in bytes.")                  \
  X(int, structured_output_max_json_depth, 32, base::AtLeast(1),                                    \
    "Deepest {} / [] nesting of a JSON schema or structural tag.")                              \
  X(int, speculative_ngram_k, 0, base::AtLeast(0),                                                \
    "Speculative decoding by prompt lookup: up to this many draft tokens per decoding sequence " \
    "and step, copied from where the sequence's last n tokens occurred before in its prompt "   \
    "and output, verified in the same forward (outputs unchanged); 0 = off. A structured-"     \
    "output request's draft ends before the first token its grammar rejects.")                 \
  X(int, speculative_ngram_max_n, 3, base::AtLeast(1),                                            \
    "Longest n-gram looked up for a draft (tried first).")                                       \
  X(int, speculative_ngram_min_n, 1, base::AtLeast(1),                                            \
    "Shortest n-gram looked up for a draft; at most --speculative_ngram_max_n.")                 \
  X(bool, speculative_ngram_pricing, true, base::AnyValue(),                                      \
    "Cut each n-gram draft to the length that pays for itself by this engine's measured step "  \
    "times and acceptance; false = the fixed draft-length rule (drafts independent of timing).") \
  X(int, speculative_disable_batch_size, 8, base::AtLeast(1),                                     \
    "No speculation in a step while this many requests or more run (a large batch is "          \
    "compute-bound, where drafts cost throughput).")                                            \
  X(std::string, speculative_model, "", base::AnyValue(),                                         \
    "Speculative decoding with a draft model: a smaller checkpoint (name or path) with the "    \
    "target's vocabulary and tokenizer proposes --speculative_num_draft_tokens greedy tokens "  \
    "per decoding sequence and step, verified in the target's forward (outputs unchanged). It " \
    "runs on the CPU in the engine process (with tensor-parallel workers too), with its own KV " \
    "cache of --kv_cache_mb. \"\" = off; not with --speculative_ngram_k.")                      \
  X(int, speculative_num_draft_tokens, 0, base::AtLeast(0),                                       \
    "Draft tokens per sequence and step of --speculative_model (each sequence's draft length "  \
    "then adapts to its acceptance, up to this).")
// clang-format on

#endif  // RILL_ENGINE_ENGINE_OPTIONS_H_
