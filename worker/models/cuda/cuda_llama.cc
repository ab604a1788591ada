#include "worker/models/cuda/cuda_llama.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "worker/models/cuda/tp_shard.h"
#include "worker/models/cuda/weights_bf16.h"
#include "worker/models/layers.h"

namespace rill::worker {
namespace {

namespace kc = ::rill::kernels::cuda;

// Logit rows projected and copied back per GEMM (the f32 logits buffer is
// [kLogitChunk][vocab], 48 MiB for a 49152-token vocabulary).
constexpr int kLogitChunk = 256;
// Keys per split-K partition of the decode attention.
constexpr int kDecodePartition = 512;

// Returns Internal naming the failed step when `expr` (a kernel launch or
// runtime call returning a cudaError_t) is non-zero. `what` is only built on
// failure.
#define RILL_CUDA_RETURN_IF_ERROR(expr, what)    \
  do {                                           \
    const int rill_cuda_err_ = (expr);           \
    if (rill_cuda_err_ != 0) {                   \
      return CudaStatus(rill_cuda_err_, (what)); \
    }                                            \
  } while (0)

size_t Bf16Bytes(size_t elems) { return elems * sizeof(uint16_t); }

}  // namespace

absl::StatusOr<std::unique_ptr<CudaLlama>> CudaLlama::Create(
    std::shared_ptr<const worker::loader::Checkpoint> checkpoint, const CudaLlamaOptions& options) {
  if (checkpoint == nullptr) return absl::InvalidArgumentError("CudaLlama: null checkpoint");
  std::unique_ptr<CudaLlama> model(new CudaLlama(std::move(checkpoint), options));
  absl::Status s = model->Init();
  if (!s.ok()) return s;
  return model;
}

CudaLlama::~CudaLlama() {
  if (stream_ != nullptr) kc::StreamSync(stream_);  // nothing may still use the buffers
  DestroyGraphs();
  kc::GemmDestroy(gemm_);
  if (stream_ != nullptr) kc::StreamDestroy(stream_);
}

absl::Status CudaLlama::Init() {
  const worker::loader::ModelConfig& c = config();
  const std::string& path = checkpoint_->path();
  if (c.architecture != "llama") {
    return absl::UnimplementedError(
        absl::StrCat(path, ": the CUDA backend runs the llama family, not '", c.architecture, "'"));
  }
  if (c.sliding_window > 0) {
    // The CUDA attention kernels have no window mask yet: refused, never
    // run as full attention (which would answer wrongly past the window).
    return absl::UnimplementedError(absl::StrCat(
        path, ": sliding-window attention (window ", c.sliding_window,
        ") is not supported by the CUDA backend yet"));
  }
  if (c.post_norms || c.mlp_activation != "silu" || c.attn_logit_softcap > 0.0 ||
      c.final_logit_softcap > 0.0 || c.embedding_scale != 1.0 || c.attention_scale != 0.0 ||
      c.norm_weight_offset != 0.0) {
    return absl::UnimplementedError(absl::StrCat(
        path, ": Gemma-style layers (post norms, GeGLU, soft-capping, scaled embeddings) are "
              "not supported by the CUDA backend yet"));
  }
  if (c.expert_count > 0) {
    return absl::UnimplementedError(absl::StrCat(
        path, ": mixture-of-experts models (", c.expert_count,
        " experts) are not supported by the CUDA backend yet"));
  }
  if (c.RopeDim() != c.head_dim || !c.local_rope_layers.empty() ||
      c.rope_scaling.type == worker::loader::RopeScaling::Type::kLongrope) {
    return absl::UnimplementedError(absl::StrCat(
        path, ": partial rotary embeddings, per-layer RoPE (Gemma 3) and LongRoPE (Phi-3) are "
              "not supported by the CUDA backend yet"));
  }
  if (c.qk_norm) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": per-head q/k normalization (Qwen3) is not supported by the CUDA "
                     "backend yet"));
  }
  if (c.num_heads <= 0 || c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 ||
      c.head_dim <= 0 || c.head_dim % 2 != 0 || c.head_dim > 128 || c.hidden_size <= 0 ||
      c.intermediate_size <= 0 || c.vocab_size <= 0 || c.num_layers <= 0 ||
      c.hidden_size > INT_MAX / 4 || c.vocab_size > INT_MAX || c.intermediate_size > INT_MAX / 4 ||
      c.num_heads * c.head_dim > INT_MAX / 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": configuration the CUDA kernels cannot run (", c.num_heads, " heads, ",
                     c.num_kv_heads, " kv heads, head_dim ", c.head_dim, " (even, <= 128), hidden ",
                     c.hidden_size, ", ffn ", c.intermediate_size, ", vocab ", c.vocab_size, ")"));
  }
  const CudaLlamaOptions& o = options_;
  if (o.num_kv_blocks <= 0 || o.block_size <= 0 ||
      static_cast<int64_t>(o.num_kv_blocks + 1) * o.block_size > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("CudaLlama: num_kv_blocks ", o.num_kv_blocks,
                                                   " x block_size ", o.block_size,
                                                   " must be positive and fit in int32 slots"));
  }
  if (o.max_batch_tokens <= 0 || o.max_batch_tokens > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaLlama: max_batch_tokens ", o.max_batch_tokens, " outside [1, 65535]"));
  }
  if (o.bench_num_layers < 0 || o.max_graph_batch < 0 || o.max_graph_context < 0) {
    return absl::InvalidArgumentError(
        "CudaLlama: negative bench_num_layers, max_graph_batch or max_graph_context");
  }
  if (absl::Status s = CheckTensorParallel(); !s.ok()) return s;
  num_kv_blocks_ = o.num_kv_blocks;
  hidden_ = static_cast<int>(c.hidden_size);
  // This rank's share (the whole model in a world of one).
  q_heads_ = part_.num_heads();
  kv_heads_ = part_.num_kv_heads();
  head_dim_ = static_cast<int>(c.head_dim);
  ffn_ = static_cast<int>(part_.ffn_size());
  vocab_ = static_cast<int>(c.vocab_size);
  q_dim_ = q_heads_ * head_dim_;
  kv_dim_ = kv_heads_ * head_dim_;
  eps_ = static_cast<float>(c.rms_norm_eps);
  // GGUF "llama" checkpoints have llama.cpp's permuted q/k rows: adjacent
  // pairs (the kernels' non-neox mode); HF and qwen2 use rotate_half (neox).
  neox_ = !c.rope_interleaved;

  RILL_CUDA_RETURN_IF_ERROR(kc::StreamCreate(&stream_), "creating the stream");
  RILL_CUDA_RETURN_IF_ERROR(kc::GemmCreate(stream_, &gemm_), "creating the cuBLAS context");
  if (absl::Status s = UploadWeights(); !s.ok()) return s;
  if (absl::Status s = AllocateBuffers(); !s.ok()) return s;
  // Decode graphs: at most the logits buffer's rows and the activation rows.
  const int graph_batch = std::min({o.max_graph_batch, kLogitChunk, o.max_batch_tokens});
  graph_max_context_ = static_cast<int>(
      std::min<int64_t>(o.max_graph_context, c.max_position_embeddings));
  if (!o.use_cuda_graphs || graph_batch <= 0 || graph_max_context_ <= 0) return absl::OkStatus();
  absl::StatusOr<kc::GraphBuckets> buckets = kc::GraphBuckets::ForMaxBatch(graph_batch);
  if (!buckets.ok()) return buckets.status();
  graph_buckets_ = std::move(*buckets);
  graph_table_width_ = (graph_max_context_ + o.block_size - 1) / o.block_size;
  const size_t ws_floats = kc::DecodeWorkspaceFloats(
      graph_batch, AttentionShape(graph_table_width_), graph_max_context_, kDecodePartition);
  if (absl::Status s = graph_tables_.Allocate(
          static_cast<size_t>(graph_batch) * graph_table_width_ * sizeof(int32_t),
          "decode graph block tables");
      !s.ok()) {
    return s;
  }
  return graph_workspace_.Allocate(ws_floats * sizeof(float), "decode graph attention workspace");
}

absl::Status CudaLlama::CheckTensorParallel() {
  const CudaLlamaOptions& o = options_;
  if (o.tp_world_size < 1 || o.tp_rank < 0 || o.tp_rank >= o.tp_world_size) {
    return absl::InvalidArgumentError(absl::StrCat("CudaLlama: tensor-parallel rank ", o.tp_rank,
                                                   " outside a world of ", o.tp_world_size));
  }
  if (o.tp_world_size > 1 && o.comm == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CudaLlama: tensor-parallel rank ", o.tp_rank, " of ", o.tp_world_size,
        " needs a device communicator"));
  }
  if (o.comm != nullptr &&
      (o.comm->world_size() != o.tp_world_size || o.comm->rank() != o.tp_rank)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CudaLlama: the ", o.comm->backend(), " communicator is rank ", o.comm->rank(), " of ",
        o.comm->world_size(), ", the options say rank ", o.tp_rank, " of ", o.tp_world_size));
  }
  // Refuses a world larger than the K/V heads, or an MLP too narrow to split.
  absl::StatusOr<TpPartition> part = PartitionForRank(config(), o.tp_rank, o.tp_world_size);
  if (!part.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(checkpoint_->path(), ": ", part.status().message()));
  }
  part_ = *part;
  return absl::OkStatus();
}

absl::Status CudaLlama::AllReduce(DeviceBuffer* partial, int tokens, int layer,
                                  const char* what) {
  if (options_.comm == nullptr) return absl::OkStatus();
  absl::Status s = options_.comm->AllReduceSumBf16(
      partial->get(), static_cast<int64_t>(tokens) * hidden_, stream_);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("layer ", layer, " ", what, " all-reduce: ",
                                             s.message()));
}

absl::Status CudaLlama::UploadWeights() {
  const worker::loader::ModelConfig& c = config();
  const worker::loader::Checkpoint& ck = *checkpoint_;
  // The same RoPE frequencies as the CPU model, scaling and llama.cpp's
  // rope_freqs divisors included.
  absl::StatusOr<std::vector<float>> inv_freq = RopeInverseFrequencies(c);
  if (!inv_freq.ok()) return inv_freq.status();
  if (ck.Find("rope_freqs") != nullptr) {
    absl::StatusOr<std::vector<float>> div = LoadVector(ck, "rope_freqs", c.head_dim / 2);
    if (!div.ok()) return div.status();
    for (size_t i = 0; i < div->size(); ++i) (*inv_freq)[i] /= (*div)[i];
  }
  if (absl::Status s = inv_freq_.AllocateFrom(*inv_freq, "inv_freq"); !s.ok()) return s;

  std::vector<uint16_t> host;
  auto upload = [&](DeviceBuffer* dst, const std::vector<uint16_t>& src, const std::string& what) {
    weight_bytes_ += static_cast<int64_t>(Bf16Bytes(src.size()));
    return dst->AllocateFrom(src, what);
  };
  if (absl::Status s = AppendMatrixBf16(ck, "token_embd", vocab_, hidden_, &host); !s.ok())
    return s;
  if (absl::Status s = upload(&embed_, host, "token_embd"); !s.ok()) return s;
  head_ = embed_.get();  // tied unless the checkpoint has its own head
  if (ck.Find("output") != nullptr) {
    host.clear();
    if (absl::Status s = AppendMatrixBf16(ck, "output", vocab_, hidden_, &host); !s.ok()) return s;
    if (absl::Status s = upload(&head_storage_, host, "output"); !s.ok()) return s;
    head_ = head_storage_.get();
  }
  host.clear();
  if (absl::Status s = AppendVectorBf16(ck, "output_norm", hidden_, &host); !s.ok()) return s;
  if (absl::Status s = upload(&final_norm_, host, "output_norm"); !s.ok()) return s;

  const int ckpt_layers = static_cast<int>(c.num_layers);
  const int n = options_.bench_num_layers > 0 ? options_.bench_num_layers : ckpt_layers;
  layers_.resize(n);
  LayerBf16 w;
  for (int l = 0; l < n; ++l) {
    const int src = l % ckpt_layers;
    if (absl::Status s = BuildLayerBf16(ck, src, &w); !s.ok()) return s;
    if (part_.world_size > 1) w = ShardLayerBf16(w, c, part_);
    Layer& L = layers_[l];
    const std::string p = absl::StrCat("blk.", l, ".");
    for (auto [dst, vec, name] :
         {std::make_tuple(&L.attn_norm, &w.attn_norm, "attn_norm"),
          std::make_tuple(&L.ffn_norm, &w.ffn_norm, "ffn_norm"),
          std::make_tuple(&L.qkv, &w.qkv, "attn_qkv"), std::make_tuple(&L.o, &w.o, "attn_output"),
          std::make_tuple(&L.gate_up, &w.gate_up, "ffn_gate_up"),
          std::make_tuple(&L.down, &w.down, "ffn_down")}) {
      if (absl::Status s = upload(dst, *vec, p + name); !s.ok()) return s;
    }
    if (!w.qkv_bias.empty()) {
      if (absl::Status s = upload(&L.qkv_bias, w.qkv_bias, p + "attn_qkv.bias"); !s.ok()) return s;
    }
  }
  LOG(INFO) << "CudaLlama: " << n << " layers (" << ckpt_layers << " in the checkpoint), "
            << weight_bytes_ / (1 << 20) << " MiB of bf16 weights uploaded"
            << (part_.world_size > 1
                    ? absl::StrCat(" (tensor-parallel rank ", part_.rank, " of ",
                                   part_.world_size, ": ", q_heads_, " query and ", kv_heads_,
                                   " K/V heads, ", ffn_, " MLP features)")
                    : std::string());
  return absl::OkStatus();
}

absl::Status CudaLlama::AllocateBuffers() {
  const size_t T = options_.max_batch_tokens;
  struct Want {
    DeviceBuffer* buf;
    size_t bytes;
    const char* what;
  };
  const Want wants[] = {
      {&h_, Bf16Bytes(T * hidden_), "residual"},
      {&normed_, Bf16Bytes(T * hidden_), "normed"},
      {&qkv_, Bf16Bytes(T * (q_dim_ + 2 * kv_dim_)), "qkv"},
      {&q_, Bf16Bytes(T * q_dim_), "q"},
      {&k_, Bf16Bytes(T * kv_dim_), "k"},
      {&v_, Bf16Bytes(T * kv_dim_), "v"},
      {&attn_, Bf16Bytes(T * q_dim_), "attention output"},
      {&o_, Bf16Bytes(T * hidden_), "o projection"},
      {&gate_up_, Bf16Bytes(T * 2 * ffn_), "gate_up"},
      {&act_, Bf16Bytes(T * ffn_), "swiglu"},
      {&mlp_, Bf16Bytes(T * hidden_), "mlp output"},
      {&gathered_, Bf16Bytes(T * hidden_), "logit rows"},
      {&tokens_, T * sizeof(int32_t), "tokens"},
      {&positions_, T * sizeof(int32_t), "positions"},
      {&slots_, T * sizeof(int32_t), "slot mapping"},
      {&query_start_, (T + 1) * sizeof(int32_t), "query_start"},
      {&context_lens_, T * sizeof(int32_t), "context_lens"},
      {&logit_rows_, T * sizeof(int32_t), "logit rows"},
      {&logits_, static_cast<size_t>(kLogitChunk) * vocab_ * sizeof(float), "logits"},
      {&sample_params_, T * sizeof(kc::SamplingParams), "sampling params"},
      {&edit_offsets_, (T + 1) * sizeof(int32_t), "logit edit offsets"},
      {&sampled_ids_, T * sizeof(int32_t), "sampled tokens"},
      {&sampled_logprobs_, T * sizeof(float), "sampled logprobs"},
      {&top_counts_, T * sizeof(int32_t), "top logprobs counts"},
      {&top_ids_, T * kc::kMaxTopLogprobs * sizeof(int32_t), "top logprobs ids"},
      {&top_logprobs_, T * kc::kMaxTopLogprobs * sizeof(float), "top logprobs"},
  };
  for (const Want& w : wants) {
    if (absl::Status s = w.buf->Allocate(w.bytes, w.what); !s.ok()) return s;
  }
  return AllocateKvCache();
}

absl::Status CudaLlama::AllocateKvCache() {
  // One block more than the engine's: decode graphs park their padding rows'
  // K/V there (PadForDecodeGraph).
  layer_cache_elems_ = static_cast<size_t>(num_kv_blocks_ + 1) * options_.block_size * kv_dim_;
  const size_t cache_bytes = Bf16Bytes(layer_cache_elems_ * layers_.size());
  kv_cache_bytes_ = static_cast<int64_t>(2 * cache_bytes);
  if (absl::Status s = k_cache_.Allocate(cache_bytes, "K cache"); !s.ok()) return s;
  if (absl::Status s = v_cache_.Allocate(cache_bytes, "V cache"); !s.ok()) return s;
  // Zeroed so that a bug reading unwritten slots shows as wrong numbers, not NaN.
  RILL_CUDA_RETURN_IF_ERROR(kc::Memset(k_cache_.get(), 0, cache_bytes, stream_), "zeroing K cache");
  RILL_CUDA_RETURN_IF_ERROR(kc::Memset(v_cache_.get(), 0, cache_bytes, stream_), "zeroing V cache");
  RILL_CUDA_RETURN_IF_ERROR(kc::StreamSync(stream_), "zeroing the KV cache");
  return absl::OkStatus();
}

absl::Status CudaLlama::SetKvCacheBlocks(int num_blocks) {
  if (num_blocks < 0 || static_cast<int64_t>(num_blocks + 1) * options_.block_size > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("CudaLlama: ", num_blocks, " KV blocks of ",
                                                   options_.block_size,
                                                   " tokens: must be >= 0 and fit in int32 slots"));
  }
  // Nothing queued may still read the old cache, and the graphs captured its
  // pointers.
  RILL_CUDA_RETURN_IF_ERROR(kc::StreamSync(stream_), "finishing work before resizing the KV cache");
  DestroyGraphs();
  // Free first, so a cache that only fits once the old one is gone can be made.
  k_cache_ = DeviceBuffer();
  v_cache_ = DeviceBuffer();
  num_kv_blocks_ = 0;
  kv_cache_bytes_ = 0;
  layer_cache_elems_ = 0;
  if (num_blocks == 0) return absl::OkStatus();
  num_kv_blocks_ = num_blocks;
  absl::Status s = AllocateKvCache();
  if (!s.ok()) {
    k_cache_ = DeviceBuffer();
    v_cache_ = DeviceBuffer();
    num_kv_blocks_ = 0;
    kv_cache_bytes_ = 0;
    layer_cache_elems_ = 0;
  }
  return s;
}

BatchLimits CudaLlama::Limits() const {
  BatchLimits l;
  l.vocab_size = vocab_;
  l.max_context = config().max_position_embeddings;
  l.num_blocks = num_kv_blocks_;
  l.block_size = options_.block_size;
  l.max_batch_tokens = options_.max_batch_tokens;
  return l;
}

kc::PagedAttentionShape CudaLlama::AttentionShape(int max_blocks_per_seq) const {
  kc::PagedAttentionShape s;
  s.q_heads = q_heads_;
  s.kv_heads = kv_heads_;
  s.head_dim = head_dim_;
  s.block_size = options_.block_size;
  s.max_blocks_per_seq = max_blocks_per_seq;
  s.scale = 0.0f;  // 1/sqrt(head_dim)
  return s;
}

absl::Status CudaLlama::EnqueueBody(const StepArrays& a) {
  const int T = a.tokens;
  kc::Stream st = stream_;
  const kc::PagedAttentionShape shape = AttentionShape(a.max_blocks_per_seq);
  RILL_CUDA_RETURN_IF_ERROR(
      kc::EmbeddingLookup(a.token_ids, embed_.get(), h_.get(), T, hidden_, vocab_, st),
      "embedding lookup");
  for (int l = 0; l < num_layers(); ++l) {
    const Layer& L = layers_[l];
    uint16_t* kcache = k_cache_.as<uint16_t>() + l * layer_cache_elems_;
    uint16_t* vcache = v_cache_.as<uint16_t>() + l * layer_cache_elems_;
    // The previous layer's MLP output is added to the residual here (none
    // before layer 0).
    RILL_CUDA_RETURN_IF_ERROR(
        kc::RmsNormResidual(l ? mlp_.get() : nullptr, h_.get(), L.attn_norm.get(), normed_.get(), T,
                            hidden_, eps_, st),
        absl::StrCat("layer ", l, " attn_norm"));
    RILL_CUDA_RETURN_IF_ERROR(kc::Gemm(gemm_, normed_.get(), L.qkv.get(), qkv_.get(), T,
                                       q_dim_ + 2 * kv_dim_, hidden_, false),
                              absl::StrCat("layer ", l, " qkv gemm"));
    RILL_CUDA_RETURN_IF_ERROR(kc::SplitQkv(qkv_.get(), L.qkv_bias.get(), q_.get(), k_.get(),
                                           v_.get(), T, q_dim_, kv_dim_, st),
                              absl::StrCat("layer ", l, " qkv split"));
    RILL_CUDA_RETURN_IF_ERROR(kc::Rope(q_.get(), k_.get(), a.positions, inv_freq_.as<float>(), T,
                                       q_heads_, kv_heads_, head_dim_, head_dim_, neox_, st),
                              absl::StrCat("layer ", l, " rope"));
    RILL_CUDA_RETURN_IF_ERROR(
        kc::KvCacheWrite(k_.get(), v_.get(), kcache, vcache, a.slots, T, kv_heads_, head_dim_, st),
        absl::StrCat("layer ", l, " kv cache write"));
    if (a.query_start != nullptr) {
      RILL_CUDA_RETURN_IF_ERROR(
          kc::PagedAttentionPrefill(q_.get(), kcache, vcache, a.block_tables, a.query_start,
                                    a.context_lens, attn_.get(), a.seqs, T, shape, st),
          absl::StrCat("layer ", l, " prefill attention"));
    } else {
      RILL_CUDA_RETURN_IF_ERROR(
          kc::PagedAttentionDecode(q_.get(), kcache, vcache, a.block_tables, a.context_lens,
                                   attn_.get(), a.decode_workspace, a.seqs, a.max_context,
                                   kDecodePartition, shape, st),
          absl::StrCat("layer ", l, " decode attention"));
    }
    RILL_CUDA_RETURN_IF_ERROR(
        kc::Gemm(gemm_, attn_.get(), L.o.get(), o_.get(), T, hidden_, q_dim_, false),
        absl::StrCat("layer ", l, " o gemm"));
    // Tensor parallel: each rank's O saw only its heads; the sum over ranks
    // is the layer's attention output (row-parallel O).
    if (absl::Status s = AllReduce(&o_, T, l, "o"); !s.ok()) return s;
    RILL_CUDA_RETURN_IF_ERROR(kc::RmsNormResidual(o_.get(), h_.get(), L.ffn_norm.get(),
                                                  normed_.get(), T, hidden_, eps_, st),
                              absl::StrCat("layer ", l, " ffn_norm"));
    RILL_CUDA_RETURN_IF_ERROR(kc::Gemm(gemm_, normed_.get(), L.gate_up.get(), gate_up_.get(), T,
                                       2 * ffn_, hidden_, false),
                              absl::StrCat("layer ", l, " gate_up gemm"));
    RILL_CUDA_RETURN_IF_ERROR(kc::SwiGlu(gate_up_.get(), act_.get(), T, ffn_, st),
                              absl::StrCat("layer ", l, " swiglu"));
    RILL_CUDA_RETURN_IF_ERROR(
        kc::Gemm(gemm_, act_.get(), L.down.get(), mlp_.get(), T, hidden_, ffn_, false),
        absl::StrCat("layer ", l, " down gemm"));
    if (absl::Status s = AllReduce(&mlp_, T, l, "down"); !s.ok()) return s;
  }
  RILL_CUDA_RETURN_IF_ERROR(kc::RmsNormResidual(mlp_.get(), h_.get(), final_norm_.get(),
                                                normed_.get(), T, hidden_, eps_, st),
                            "final norm");
  return absl::OkStatus();
}

namespace {

struct Upload {
  DeviceBuffer* buf;
  const std::vector<int32_t>* v;
  const char* what;
};

// Copies each host array to the start of its device buffer, then waits:
// cudaMemcpy from pageable memory may return before its DMA lands, and runs
// on the legacy stream, which does not order with the model's non-blocking
// stream, so the kernels must not read the arrays before this returns.
absl::Status UploadAndWait(std::initializer_list<Upload> uploads) {
  for (const Upload& u : uploads) {
    if (absl::Status s = u.buf->Upload(u.v->data(), u.v->size() * sizeof(int32_t), u.what);
        !s.ok()) {
      return s;
    }
  }
  return CudaStatus(kc::StreamSync(nullptr), "waiting for the step's uploads");
}

}  // namespace

absl::Status CudaLlama::EnqueueDecodeLogits(const StepArrays& a, void* logits) {
  if (absl::Status s = EnqueueBody(a); !s.ok()) return s;
  RILL_CUDA_RETURN_IF_ERROR(
      kc::Gemm(gemm_, normed_.get(), head_, logits, a.tokens, vocab_, hidden_, true),
      "lm head gemm");
  return absl::OkStatus();
}

absl::Status CudaLlama::UploadStep(const BatchArrays& a) {
  const size_t table_bytes = a.block_tables.size() * sizeof(int32_t);
  if (absl::Status s = block_tables_.Reserve(table_bytes, "block tables"); !s.ok()) return s;
  return UploadAndWait({{&tokens_, &a.tokens, "tokens"},
                        {&positions_, &a.positions, "positions"},
                        {&slots_, &a.slot_mapping, "slot mapping"},
                        {&query_start_, &a.query_start, "query_start"},
                        {&context_lens_, &a.context_lens, "context_lens"},
                        {&logit_rows_, &a.logit_rows, "logit rows"},
                        {&block_tables_, &a.block_tables, "block tables"}});
}

absl::Status CudaLlama::Forward(const ForwardBatch& batch, ForwardOutput* out) {
  if (out == nullptr) return absl::InvalidArgumentError("CudaLlama::Forward: null output");
  if (num_kv_blocks_ == 0) {
    return absl::FailedPreconditionError("CudaLlama: the KV cache is released (asleep)");
  }
  if (absl::Status s = ValidateBatch(batch, Limits()); !s.ok()) return s;
  if (absl::Status s = ValidateDeviceSampling(batch); !s.ok()) return s;
  const BatchArrays a = BuildBatchArrays(batch, options_.block_size);
  const SamplingArrays sa = BuildSamplingArrays(batch, a.logits_per_seq);
  if (absl::Status s = UploadSampling(sa); !s.ok()) return s;
  if (CanReplay(batch, a)) return ForwardDecodeGraph(a, sa, out);
  if (absl::Status s = UploadStep(a); !s.ok()) return s;
  StepArrays step;
  step.tokens = a.num_tokens;
  step.token_ids = tokens_.as<int32_t>();
  step.positions = positions_.as<int32_t>();
  step.slots = slots_.as<int32_t>();
  step.block_tables = block_tables_.as<int32_t>();
  step.context_lens = context_lens_.as<int32_t>();
  step.max_blocks_per_seq = a.max_blocks_per_seq;
  step.seqs = a.num_seqs;
  step.query_start = query_start_.as<int32_t>();
  step.max_context = a.max_context;
  if (absl::Status s = EnqueueBody(step); !s.ok()) return s;
  if (absl::Status s = CopyHidden(a, batch, out); !s.ok()) return s;
  return CopyLogits(a, sa, out);
}

absl::Status CudaLlama::UploadSampling(const SamplingArrays& sa) {
  if (sa.num_device_rows == 0) return absl::OkStatus();
  const size_t edit_bytes = sa.edits.size() * sizeof(kc::LogitEdit);
  if (absl::Status s = edits_.Reserve(edit_bytes, "logit edits"); !s.ok()) return s;
  if (absl::Status s = sample_params_.Upload(
          sa.params.data(), sa.params.size() * sizeof(kc::SamplingParams), "sampling params");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = edit_offsets_.Upload(sa.edit_offsets.data(),
                                            sa.edit_offsets.size() * sizeof(int32_t),
                                            "logit edit offsets");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = edits_.Upload(sa.edits.data(), edit_bytes, "logit edits"); !s.ok()) {
    return s;
  }
  if (sa.max_top_logprobs > 0) {
    if (absl::Status s = top_counts_.Upload(sa.top_logprobs.data(),
                                            sa.top_logprobs.size() * sizeof(int32_t),
                                            "top logprobs counts");
        !s.ok()) {
      return s;
    }
  }
  // As UploadAndWait: the legacy-stream copies must land before stream_ reads them.
  return CudaStatus(kc::StreamSync(nullptr), "waiting for the sampling uploads");
}

absl::Status CudaLlama::EnqueueSampling(const SamplingArrays& sa, int first_row, int rows) {
  float* logits = logits_.as<float>();
  int32_t* ids = sampled_ids_.as<int32_t>() + first_row;
  RILL_CUDA_RETURN_IF_ERROR(
      kc::ApplyLogitEdits(logits, edits_.as<kc::LogitEdit>(),
                          edit_offsets_.as<int32_t>() + first_row, rows, vocab_, stream_),
      "applying logit edits");
  RILL_CUDA_RETURN_IF_ERROR(kc::Sample(logits, sample_params_.as<kc::SamplingParams>() + first_row,
                                       ids, rows, vocab_, stream_),
                            "sampling");
  // The sampled token's log-softmax over the edited logits, as the host sampler reports it.
  RILL_CUDA_RETURN_IF_ERROR(
      kc::Logprobs(logits, ids, sampled_logprobs_.as<float>() + first_row, rows, vocab_, stream_),
      "sampled logprobs");
  if (sa.max_top_logprobs > 0) {
    const size_t at = static_cast<size_t>(first_row) * kc::kMaxTopLogprobs;
    RILL_CUDA_RETURN_IF_ERROR(
        kc::TopLogprobs(logits, top_counts_.as<int32_t>() + first_row, top_ids_.as<int32_t>() + at,
                        top_logprobs_.as<float>() + at, rows, vocab_, kc::kMaxTopLogprobs, stream_),
        "top logprobs");
  }
  return absl::OkStatus();
}

absl::Status CudaLlama::CopySampled(const SamplingArrays& sa, ForwardOutput* out) {
  out->sampled.clear();
  if (sa.num_device_rows == 0) return absl::OkStatus();
  const size_t rows = sa.params.size();
  std::vector<int32_t> ids(rows);
  std::vector<float> logprobs(rows);
  RILL_CUDA_RETURN_IF_ERROR(kc::StreamSync(stream_), "sampling on the device");
  RILL_CUDA_RETURN_IF_ERROR(
      kc::CopyToHost(ids.data(), sampled_ids_.get(), rows * sizeof(int32_t)),
      "copying sampled tokens to the host");
  RILL_CUDA_RETURN_IF_ERROR(
      kc::CopyToHost(logprobs.data(), sampled_logprobs_.get(), rows * sizeof(float)),
      "copying sampled logprobs to the host");
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
  if (sa.max_top_logprobs > 0) {
    top_ids.resize(rows * kc::kMaxTopLogprobs);
    top_logprobs.resize(top_ids.size());
    RILL_CUDA_RETURN_IF_ERROR(
        kc::CopyToHost(top_ids.data(), top_ids_.get(), top_ids.size() * sizeof(int32_t)),
        "copying top logprobs ids to the host");
    RILL_CUDA_RETURN_IF_ERROR(kc::CopyToHost(top_logprobs.data(), top_logprobs_.get(),
                                             top_logprobs.size() * sizeof(float)),
                              "copying top logprobs to the host");
  }
  out->sampled = SampledTokens(sa, ids, logprobs, top_ids, top_logprobs);
  return absl::OkStatus();
}

absl::Status CudaLlama::CopyLogitRow(int row, std::vector<float>* dst) {
  dst->resize(vocab_);
  RILL_CUDA_RETURN_IF_ERROR(
      kc::CopyToHost(dst->data(), logits_.as<float>() + static_cast<size_t>(row) * vocab_,
                     static_cast<size_t>(vocab_) * sizeof(float)),
      "copying logits to the host");
  return absl::OkStatus();
}

absl::StatusOr<kc::GraphExec> CudaLlama::RunAndCapture(
    const std::function<absl::Status()>& enqueue) {
  // Once eagerly, so cuBLAS picks its kernels outside the capture; capturing
  // then queues nothing, and the eager run's results stand.
  if (absl::Status s = enqueue(); !s.ok()) return s;
  RILL_CUDA_RETURN_IF_ERROR(kc::StreamSync(stream_), "eager step before graph capture");
  RILL_CUDA_RETURN_IF_ERROR(kc::GraphCaptureBegin(stream_), "beginning graph capture");
  const absl::Status captured = enqueue();
  kc::GraphExec graph = nullptr;
  const int end_err = kc::GraphCaptureEnd(stream_, &graph);  // always end the capture
  if (!captured.ok() || end_err != 0) {
    if (graph != nullptr) kc::GraphDestroy(graph);
    if (!captured.ok()) return captured;
    return CudaStatus(end_err, "ending graph capture");
  }
  return graph;
}

bool CudaLlama::CanReplay(const ForwardBatch& batch, const BatchArrays& a) const {
  return graph_buckets_.has_value() && a.num_seqs <= graph_buckets_->max_batch() &&
         a.max_context <= graph_max_context_ && a.max_blocks_per_seq <= graph_table_width_ &&
         IsDecodeOnly(batch);
}

void CudaLlama::DestroyGraphs() {
  for (auto& [bucket, graph] : graphs_) kc::GraphDestroy(graph);
  graphs_.clear();
}

absl::Status CudaLlama::ForwardDecodeGraph(const BatchArrays& a, const SamplingArrays& sa,
                                           ForwardOutput* out) {
  absl::StatusOr<int> bucket = graph_buckets_->BucketFor(a.num_seqs);
  if (!bucket.ok()) return bucket.status();
  const int b = *bucket;
  const DecodeGraphArrays p =
      PadForDecodeGraph(a, b, graph_table_width_, num_kv_blocks_, options_.block_size);
  if (absl::Status s = UploadAndWait({{&tokens_, &p.tokens, "tokens"},
                                      {&positions_, &p.positions, "positions"},
                                      {&slots_, &p.slot_mapping, "slot mapping"},
                                      {&context_lens_, &p.context_lens, "context_lens"},
                                      {&graph_tables_, &p.block_tables, "decode graph block tables"}});
      !s.ok()) {
    return s;
  }
  // Fixed buffers only, so the captured pointers stay valid for every step.
  StepArrays step;
  step.tokens = b;
  step.token_ids = tokens_.as<int32_t>();
  step.positions = positions_.as<int32_t>();
  step.slots = slots_.as<int32_t>();
  step.block_tables = graph_tables_.as<int32_t>();
  step.context_lens = context_lens_.as<int32_t>();
  step.max_blocks_per_seq = graph_table_width_;
  step.seqs = b;
  step.decode_workspace = graph_workspace_.as<float>();
  step.max_context = graph_max_context_;
  auto enqueue = [&]() { return EnqueueDecodeLogits(step, logits_.get()); };
  auto it = graphs_.find(b);
  if (it != graphs_.end()) {
    RILL_CUDA_RETURN_IF_ERROR(kc::GraphLaunch(it->second, stream_), "decode graph launch");
  } else {
    // First step of this bucket: its eager run is this step's result; the
    // graph serves the next steps.
    absl::StatusOr<kc::GraphExec> graph = RunAndCapture(enqueue);
    if (!graph.ok()) return graph.status();
    graphs_.emplace(b, *graph);
  }
  if (sa.num_device_rows > 0) {
    // After the graph, on the same stream: a decode step's logit rows are
    // its sequences, at the start of logits_ (padding rows after them).
    if (absl::Status s = EnqueueSampling(sa, 0, a.num_seqs); !s.ok()) return s;
    if (absl::Status s = CopySampled(sa, out); !s.ok()) return s;
    out->hidden.assign(a.num_seqs, {});
    out->logits.assign(a.num_seqs, {});
    for (int s = 0; s < a.num_seqs; ++s) {
      if (!sa.host_row[s]) continue;
      if (absl::Status st = CopyLogitRow(s, &out->logits[s]); !st.ok()) return st;
    }
    return absl::OkStatus();
  }
  out->sampled.clear();
  RILL_CUDA_RETURN_IF_ERROR(kc::StreamSync(stream_), "running the decode step");
  std::vector<float> flat(static_cast<size_t>(a.num_seqs) * vocab_);
  RILL_CUDA_RETURN_IF_ERROR(kc::CopyToHost(flat.data(), logits_.get(), flat.size() * sizeof(float)),
                            "copying logits to the host");
  out->hidden.assign(a.num_seqs, {});
  out->logits.assign(a.num_seqs, {});
  for (int s = 0; s < a.num_seqs; ++s) {
    out->logits[s].assign(flat.begin() + static_cast<size_t>(s) * vocab_,
                          flat.begin() + static_cast<size_t>(s + 1) * vocab_);
  }
  return absl::OkStatus();
}

absl::Status CudaLlama::CopyLogits(const BatchArrays& a, const SamplingArrays& sa,
                                   ForwardOutput* out) {
  const int rows = static_cast<int>(a.logit_rows.size());
  // The rows whose logits are wanted, gathered after the final norm (the
  // embedding-lookup kernel reads normed_ as a table of T rows).
  RILL_CUDA_RETURN_IF_ERROR(
      kc::EmbeddingLookup(logit_rows_.as<int32_t>(), normed_.get(), gathered_.get(), rows, hidden_,
                          a.num_tokens, stream_),
      "gathering the logit rows");
  const bool sampling = sa.num_device_rows > 0;
  // Where each logit row lands on the host: one flat array, or with device
  // sampling each host-sampled sequence's own (device rows come back as ids).
  std::vector<float> flat;
  std::vector<float*> dst(rows, nullptr);
  out->logits.assign(a.num_seqs, {});
  if (!sampling) {
    flat.resize(static_cast<size_t>(rows) * vocab_);
    for (int r = 0; r < rows; ++r) dst[r] = flat.data() + static_cast<size_t>(r) * vocab_;
  } else {
    int r = 0;
    for (int s = 0; s < a.num_seqs; ++s) {
      if (sa.device_row[s] < 0) {
        out->logits[s].resize(static_cast<size_t>(a.logits_per_seq[s]) * vocab_);
        for (int j = 0; j < a.logits_per_seq[s]; ++j) {
          dst[r + j] = out->logits[s].data() + static_cast<size_t>(j) * vocab_;
        }
      }
      r += a.logits_per_seq[s];
    }
  }
  for (int r0 = 0; r0 < rows; r0 += kLogitChunk) {
    const int m = std::min(kLogitChunk, rows - r0);
    RILL_CUDA_RETURN_IF_ERROR(
        kc::Gemm(gemm_, gathered_.as<uint16_t>() + static_cast<size_t>(r0) * hidden_, head_,
                 logits_.get(), m, vocab_, hidden_, true),
        "lm head gemm");
    if (!sampling) {
      // Also where asynchronous errors of the whole step surface.
      RILL_CUDA_RETURN_IF_ERROR(kc::StreamSync(stream_), "running the forward step");
      RILL_CUDA_RETURN_IF_ERROR(kc::CopyToHost(dst[r0], logits_.get(),
                                               static_cast<size_t>(m) * vocab_ * sizeof(float)),
                                "copying logits to the host");
      continue;
    }
    // Sample this chunk's rows before the next chunk overwrites logits_;
    // only the host rows' logits come back.
    if (absl::Status s = EnqueueSampling(sa, r0, m); !s.ok()) return s;
    RILL_CUDA_RETURN_IF_ERROR(kc::StreamSync(stream_), "running the forward step");
    for (int r = r0; r < r0 + m; ++r) {
      if (dst[r] == nullptr) continue;
      RILL_CUDA_RETURN_IF_ERROR(
          kc::CopyToHost(dst[r], logits_.as<float>() + static_cast<size_t>(r - r0) * vocab_,
                         static_cast<size_t>(vocab_) * sizeof(float)),
          "copying logits to the host");
    }
  }
  if (absl::Status s = CopySampled(sa, out); !s.ok()) return s;
  if (sampling) return absl::OkStatus();
  size_t r = 0;
  for (int s = 0; s < a.num_seqs; ++s) {
    const size_t n = static_cast<size_t>(a.logits_per_seq[s]) * vocab_;
    out->logits[s].assign(flat.begin() + r, flat.begin() + r + n);
    r += n;
  }
  return absl::OkStatus();
}

absl::Status CudaLlama::CopyHidden(const BatchArrays& a, const ForwardBatch& batch,
                                   ForwardOutput* out) {
  out->hidden.assign(a.num_seqs, {});
  bool any = false;
  for (const SequenceChunk& seq : batch.sequences) any = any || seq.return_hidden;
  if (!any) return absl::OkStatus();
  std::vector<uint16_t> all(static_cast<size_t>(a.num_tokens) * hidden_);
  RILL_CUDA_RETURN_IF_ERROR(kc::StreamSync(stream_), "running the forward step");
  RILL_CUDA_RETURN_IF_ERROR(kc::CopyToHost(all.data(), normed_.get(), Bf16Bytes(all.size())),
                            "copying hidden states to the host");
  for (int s = 0; s < a.num_seqs; ++s) {
    if (!batch.sequences[s].return_hidden) continue;
    const size_t begin = static_cast<size_t>(a.query_start[s]) * hidden_;
    const size_t end = static_cast<size_t>(a.query_start[s + 1]) * hidden_;
    std::vector<float>& h = out->hidden[s];
    h.resize(end - begin);
    for (size_t i = begin; i < end; ++i) h[i - begin] = Bf16ToFloat(all[i]);
  }
  return absl::OkStatus();
}

absl::StatusOr<CudaLlama::DecodeBench> CudaLlama::BenchDecode(int batch, int context,
                                                              int iterations) {
  const int bs = options_.block_size;
  const int blocks_per_seq = (context + 1 + bs - 1) / bs;
  if (batch <= 0 || batch > options_.max_batch_tokens || context < 0 || iterations <= 0 ||
      static_cast<int64_t>(batch) * blocks_per_seq > num_kv_blocks_ ||
      context + 1 > config().max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BenchDecode: batch ", batch, " x context ", context, " needs ",
        static_cast<int64_t>(batch) * blocks_per_seq, " cache blocks (have ", num_kv_blocks_, ") and batch <= max_batch_tokens ", options_.max_batch_tokens));
  }
  // The graph captures these pointers: they live until it is destroyed.
  std::vector<int32_t> tok(batch), pos(batch, context), slot(batch), lens(batch, context + 1),
      table(static_cast<size_t>(batch) * blocks_per_seq);
  for (int b = 0; b < batch; ++b) {
    tok[b] = static_cast<int32_t>((1009u * b + 17u) % static_cast<unsigned>(vocab_));
    for (int j = 0; j < blocks_per_seq; ++j)
      table[static_cast<size_t>(b) * blocks_per_seq + j] = b * blocks_per_seq + j;
    slot[b] = (b * blocks_per_seq + context / bs) * bs + context % bs;
  }
  std::vector<kc::SamplingParams> params(batch);
  for (auto& p : params) p.temperature = 0.0f;  // greedy
  const kc::PagedAttentionShape shape = AttentionShape(blocks_per_seq);
  const size_t ws_floats = kc::DecodeWorkspaceFloats(batch, shape, context + 1, kDecodePartition);
  DeviceBuffer d_tok, d_pos, d_slot, d_lens, d_table, d_params, d_logits, d_ws;
  for (absl::Status s :
       {d_tok.AllocateFrom(tok, "bench tokens"), d_pos.AllocateFrom(pos, "bench positions"),
        d_slot.AllocateFrom(slot, "bench slots"), d_lens.AllocateFrom(lens, "bench context_lens"),
        d_table.AllocateFrom(table, "bench block tables"),
        d_params.AllocateFrom(params, "bench sampling params"),
        d_logits.Allocate(static_cast<size_t>(batch) * vocab_ * sizeof(float), "bench logits"),
        d_ws.Allocate(ws_floats * sizeof(float), "bench attention workspace")}) {
    if (!s.ok()) return s;
  }
  RILL_CUDA_RETURN_IF_ERROR(kc::StreamSync(nullptr), "bench uploads");
  StepArrays step;
  step.tokens = batch;
  step.token_ids = d_tok.as<int32_t>();
  step.positions = d_pos.as<int32_t>();
  step.slots = d_slot.as<int32_t>();
  step.block_tables = d_table.as<int32_t>();
  step.context_lens = d_lens.as<int32_t>();
  step.max_blocks_per_seq = blocks_per_seq;
  step.seqs = batch;
  step.decode_workspace = d_ws.as<float>();
  step.max_context = context + 1;
  auto enqueue = [&]() -> absl::Status {
    if (absl::Status s = EnqueueDecodeLogits(step, d_logits.get()); !s.ok()) return s;
    RILL_CUDA_RETURN_IF_ERROR(kc::Sample(d_logits.as<float>(), d_params.as<kc::SamplingParams>(),
                                         d_tok.as<int32_t>(), batch, vocab_, stream_),
                              "bench sampling");
    return absl::OkStatus();
  };
  absl::StatusOr<kc::GraphExec> captured = RunAndCapture(enqueue);
  if (!captured.ok()) return captured.status();
  kc::GraphExec graph = *captured;
  DecodeBench result;
  absl::Status s = [&]() -> absl::Status {
    for (int i = 0; i < 3; ++i) {
      RILL_CUDA_RETURN_IF_ERROR(kc::GraphLaunch(graph, stream_), "graph warm-up");
    }
    RILL_CUDA_RETURN_IF_ERROR(kc::StreamSync(stream_), "graph warm-up");
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) {
      RILL_CUDA_RETURN_IF_ERROR(kc::GraphLaunch(graph, stream_), "graph launch");
    }
    RILL_CUDA_RETURN_IF_ERROR(kc::StreamSync(stream_), "graph replay");
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iterations;
    result.batch = batch;
    result.ms_per_step = secs * 1e3;
    result.tokens_per_s = batch / secs;
    return absl::OkStatus();
  }();
  kc::StreamSync(stream_);
  kc::GraphDestroy(graph);
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<double> CudaLlama::BenchPrefill(int tokens, int iterations) {
  const int blocks = (tokens + options_.block_size - 1) / options_.block_size;
  if (tokens <= 0 || iterations <= 0 || blocks > num_kv_blocks_) {
    return absl::InvalidArgumentError(absl::StrCat("BenchPrefill: ", tokens, " tokens need ",
                                                   blocks, " cache blocks (have ",
                                                   num_kv_blocks_, ")"));
  }
  ForwardBatch batch;
  SequenceChunk seq;
  for (int i = 0; i < tokens; ++i) {
    seq.tokens.push_back(static_cast<int32_t>((7919u * i + 3u) % static_cast<unsigned>(vocab_)));
  }
  for (int b = 0; b < blocks; ++b) seq.block_table.push_back(b);
  batch.sequences.push_back(std::move(seq));
  ForwardOutput out;
  if (absl::Status s = Forward(batch, &out); !s.ok()) return s;  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    if (absl::Status s = Forward(batch, &out); !s.ok()) return s;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iterations;
  return tokens / secs;
}

}  // namespace rill::worker
