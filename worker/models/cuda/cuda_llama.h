// The Llama family (SmolLM2, TinyLlama, Llama-2/3, Qwen2) on one CUDA GPU in
// BF16, the whole model or one tensor-parallel rank of it (NCCL across GPUs):
// weights are dequantized on the CPU from any checkpoint type, rounded once
// to bf16 and uploaded at Create; activations and the paged KV cache are
// bf16, GEMMs accumulate in FP32 (cuBLAS), logits come back as float. Logits
// sit ~1e-2 (relative L2) from the f32 CPU model (worker/models/llama.cc).
//
// Thread: one step thread; Forward and the benchmarks are not reentrant (they
// share the model's stream, cuBLAS handle and activation buffers).
#ifndef RILL_WORKER_MODELS_CUDA_CUDA_LLAMA_H_
#define RILL_WORKER_MODELS_CUDA_CUDA_LLAMA_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/plan/graph_buckets.h"
#include "worker/comm/device_communicator.h"
#include "worker/forward_batch.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/cuda/batch_arrays.h"
#include "worker/models/cuda/device_buffer.h"
#include "worker/models/cuda/sampling_arrays.h"
#include "worker/models/tp_plan.h"

namespace rill::worker {

struct CudaLlamaOptions {
  int num_kv_blocks = 0;  // blocks of the GPU KV cache (required)
  int block_size = 16;    // token slots per block
  // Most new tokens in one Forward (sizes the activation buffers; at most
  // 65535, the prefill kernel's grid limit).
  int max_batch_tokens = 4096;
  // Benchmark only: run this many decoder layers, layer l holding its own
  // copy of checkpoint layer l % num_layers, so a checkpoint cut to a few
  // layers (to travel to a GPU box) is timed at the full model's depth. The
  // logits are then meaningless. 0: the checkpoint's layers.
  int bench_num_layers = 0;
  // Decode-only steps (one new token per sequence, last logits only) replay a
  // CUDA graph per batch-size bucket (kernels/cuda/plan/graph_buckets.h), so
  // a step is one launch instead of ~12 per layer. A bucket's graph is
  // captured the first time a step needs it. Steps with more sequences than
  // max_graph_batch (at most 256, the logits buffer's rows) or a context
  // past max_graph_context run eagerly, as prefill steps do.
  bool use_cuda_graphs = true;
  int max_graph_batch = 256;
  int max_graph_context = 8192;
  // Tensor parallelism (worker/models/tp_plan.h, the CPU path's plan): this
  // rank holds tp_rank's share of the heads and MLP features (tp_shard.h)
  // and sums the partial outputs of O and down with `comm` (required, and of
  // this rank and world size, when tp_world_size > 1), on the eager path and
  // inside the decode graphs. Embeddings, norms and the LM head are
  // replicated, so every rank computes the same logits (and samples the same
  // tokens). A comm in a world of one is used too (a no-op sum), so one GPU
  // exercises the communicator. The KV cache holds this rank's K/V heads.
  int tp_rank = 0;
  int tp_world_size = 1;
  DeviceCommunicator* comm = nullptr;
};

class CudaLlama {
 public:
  // Errors: InvalidArgument for a bad configuration or options, NotFound /
  // InvalidArgument for missing or misshapen tensors, Unimplemented for an
  // unsupported architecture or RoPE scaling, Internal for CUDA failures.
  static absl::StatusOr<std::unique_ptr<CudaLlama>> Create(
      std::shared_ptr<const worker::loader::Checkpoint> checkpoint,
      const CudaLlamaOptions& options);
  ~CudaLlama();
  CudaLlama(const CudaLlama&) = delete;
  CudaLlama& operator=(const CudaLlama&) = delete;

  const worker::loader::ModelConfig& config() const { return checkpoint_->config(); }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  int64_t weight_bytes() const { return weight_bytes_; }
  int64_t kv_cache_bytes() const { return kv_cache_bytes_; }
  int num_kv_blocks() const { return num_kv_blocks_; }

  // Replaces the KV cache with `num_blocks` zeroed blocks (its contents are
  // lost), or frees it for 0 (Sleep level 1: the weights stay). Forward then
  // fails with FailedPrecondition until blocks are set again. The engine
  // sizes the cache this way once the weights and activation buffers are
  // placed (cuda_model_executor.cc).
  absl::Status SetKvCacheBlocks(int num_blocks);

  // Runs a ragged batch (any mix of prefill chunks and decode tokens) over the
  // GPU KV cache: writes each new token's K/V at its block-table slot and
  // returns float logits as CausalLm::Forward does (the last token of each
  // sequence, or every new token with all_logits; hidden states with
  // return_hidden). InvalidArgument, with nothing run, for a batch that
  // ValidateBatch rejects; Internal for a CUDA failure.
  // Sequences with device_sampling are sampled here after the LM head
  // (logit edits, then kernels/cuda Sample and Logprobs): their token and
  // logprob come back in out->sampled and their logits row stays empty, so
  // only the other rows' logits cross to the host (ValidateDeviceSampling's
  // errors are InvalidArgument too).
  absl::Status Forward(const ForwardBatch& batch, ForwardOutput* out);

  struct DecodeBench {
    int batch = 0;
    double ms_per_step = 0;
    double tokens_per_s = 0;
  };
  // Times a decode step of `batch` sequences, each with `context` cached
  // tokens (whatever the cache holds), as one CUDA graph replayed
  // `iterations` times: embedding, layers with PagedAttentionDecode, final
  // norm, f32 logits and greedy GPU sampling. Uses cache blocks
  // [0, batch * ceil((context + 1) / block_size)), overwriting them.
  absl::StatusOr<DecodeBench> BenchDecode(int batch, int context, int iterations);

  // Prefill tokens/s of one `tokens`-token prompt through Forward (host
  // copies included), mean of `iterations` runs after one warm-up. Uses cache
  // blocks [0, ceil(tokens / block_size)).
  absl::StatusOr<double> BenchPrefill(int tokens, int iterations);

 private:
  struct Layer {
    DeviceBuffer attn_norm, ffn_norm, qkv, qkv_bias, o, gate_up, down;
  };
  // Device pointers and sizes of one step's token and attention arrays.
  struct StepArrays {
    int tokens = 0;
    const int32_t* token_ids = nullptr;
    const int32_t* positions = nullptr;
    const int32_t* slots = nullptr;
    const int32_t* block_tables = nullptr;
    const int32_t* context_lens = nullptr;
    int max_blocks_per_seq = 1;
    int seqs = 0;
    // Prefill (ragged): query_start [seqs + 1]. Decode (one token per
    // sequence, seqs == tokens): null, with the split-K workspace below.
    const int32_t* query_start = nullptr;
    float* decode_workspace = nullptr;
    int max_context = 0;
  };

  CudaLlama(std::shared_ptr<const worker::loader::Checkpoint> checkpoint,
            const CudaLlamaOptions& options)
      : checkpoint_(std::move(checkpoint)), options_(options) {}
  absl::Status Init();
  // Validates the tensor-parallel options and sets part_.
  absl::Status CheckTensorParallel();
  // Queues the all-reduce of a row-parallel layer's partial output
  // ([tokens][hidden] bf16 at the start of `partial`) when there is a comm.
  absl::Status AllReduce(DeviceBuffer* partial, int tokens, int layer, const char* what);
  absl::Status UploadWeights();
  absl::Status AllocateBuffers();
  absl::Status AllocateKvCache();
  // Queues embedding, every layer and the final norm (all rows, into
  // normed_) on stream_. Safe to capture in a graph.
  absl::Status EnqueueBody(const StepArrays& a);
  // EnqueueBody, then f32 logits of every row (a decode step's rows are its
  // sequences) into `logits` ([a.tokens][vocab]).
  absl::Status EnqueueDecodeLogits(const StepArrays& a, void* logits);
  absl::Status UploadStep(const BatchArrays& a);
  // A decode-only step through its bucket's graph (IsDecodeOnly, and within
  // the graph limits).
  bool CanReplay(const ForwardBatch& batch, const BatchArrays& a) const;
  // Runs `enqueue` (work on stream_) once, then captures the same work into
  // an executable graph, which the caller destroys.
  absl::StatusOr<::rill::kernels::cuda::GraphExec> RunAndCapture(
      const std::function<absl::Status()>& enqueue);
  absl::Status ForwardDecodeGraph(const BatchArrays& a, const SamplingArrays& sa,
                                  ForwardOutput* out);
  void DestroyGraphs();
  absl::Status CopyLogits(const BatchArrays& a, const SamplingArrays& sa, ForwardOutput* out);
  // Device sampling (SamplingArrays::num_device_rows > 0): UploadSampling
  // before the step's kernels; EnqueueSampling over logit rows
  // [first_row, first_row + rows), which sit at the start of logits_; then
  // CopySampled once every row is done.
  absl::Status UploadSampling(const SamplingArrays& sa);
  absl::Status EnqueueSampling(const SamplingArrays& sa, int first_row, int rows);
  absl::Status CopySampled(const SamplingArrays& sa, ForwardOutput* out);
  // Copies logit row `row` of logits_ into `dst` ([vocab] floats).
  absl::Status CopyLogitRow(int row, std::vector<float>* dst);
  absl::Status CopyHidden(const BatchArrays& a, const ForwardBatch& batch, ForwardOutput* out);
  BatchLimits Limits() const;
  ::rill::kernels::cuda::PagedAttentionShape AttentionShape(int max_blocks_per_seq) const;

  std::shared_ptr<const worker::loader::Checkpoint> checkpoint_;
  CudaLlamaOptions options_;
  TpPartition part_;  // this rank's heads and MLP features
  // Head counts and ffn_ are this rank's share (the whole model's in a world of one).
  int hidden_ = 0, q_heads_ = 0, kv_heads_ = 0, head_dim_ = 0, ffn_ = 0, vocab_ = 0;
  int q_dim_ = 0, kv_dim_ = 0;
  float eps_ = 1e-5f;
  bool neox_ = true;
  int64_t weight_bytes_ = 0, kv_cache_bytes_ = 0;
  int num_kv_blocks_ = 0;  // 0: released (SetKvCacheBlocks)

  ::rill::kernels::cuda::Stream stream_ = nullptr;
  ::rill::kernels::cuda::GemmContext* gemm_ = nullptr;

  std::vector<Layer> layers_;
  DeviceBuffer embed_, head_storage_, final_norm_, inv_freq_;
  const void* head_ = nullptr;  // embed_ when tied, else head_storage_
  // Per layer K and V: [num_blocks][block_size][kv_heads][head_dim] bf16.
  DeviceBuffer k_cache_, v_cache_;
  size_t layer_cache_elems_ = 0;
  // Activations, [max_batch_tokens][...] bf16.
  DeviceBuffer h_, normed_, qkv_, q_, k_, v_, attn_, o_, gate_up_, act_, mlp_, gathered_;
  // Step arrays ([max_batch_tokens] int32 unless noted) and f32 logits
  // [kLogitChunk][vocab].
  DeviceBuffer tokens_, positions_, slots_, query_start_, context_lens_, logit_rows_;
  DeviceBuffer block_tables_;  // grown on demand
  DeviceBuffer logits_;
  // Device sampling, per logit row ([max_batch_tokens]): params, edit
  // offsets (+1), edits (grown on demand), the sampled ids and logprobs.
  DeviceBuffer sample_params_, edit_offsets_, edits_, sampled_ids_, sampled_logprobs_;
  // Top logprobs: counts [max_batch_tokens], ids and values
  // [max_batch_tokens][kMaxTopLogprobs].
  DeviceBuffer top_counts_, top_ids_, top_logprobs_;

  // Decode graphs: the block tables [max bucket][graph_table_width_] and the
  // split-K workspace they read, sized once; one executable graph per bucket
  // (they capture the cache's pointers, so a resized cache drops them).
  std::optional<::rill::kernels::cuda::GraphBuckets> graph_buckets_;
  int graph_table_width_ = 0;
  int graph_max_context_ = 0;
  DeviceBuffer graph_tables_, graph_workspace_;
  std::map<int, ::rill::kernels::cuda::GraphExec> graphs_;
};

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_CUDA_CUDA_LLAMA_H_
