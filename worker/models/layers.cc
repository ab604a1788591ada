#include "worker/models/layers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quant_types.h"

namespace rill::worker {
namespace {

// The type of tensor `name` when the kernels run it (Unimplemented otherwise).
absl::StatusOr<kernels::cpu::GgmlType> KernelType(const worker::loader::Checkpoint& ckpt,
                                                  const std::string& name,
                                                  kernels::cpu::GgmlType type) {
  if (!kernels::cpu::CanDequantize(type)) {
    return absl::UnimplementedError(absl::StrCat(ckpt.path(), ": tensor ", name, " has type ",
                                                 std::string(kernels::cpu::GgmlTypeName(type)),
                                                 ", which the CPU kernels do not run"));
  }
  return type;
}

}  // namespace

absl::StatusOr<kernels::cpu::WeightMatrix> BindMatrix(const worker::loader::Checkpoint& ckpt,
                                                      const std::string& name, int64_t rows,
                                                      int64_t cols, bool float_activations) {
  absl::StatusOr<const worker::loader::TensorRef*> ref = ckpt.Get(name);
  if (!ref.ok()) return ref.status();
  const worker::loader::TensorRef& t = **ref;
  if (t.ne.size() != 2 || t.ne[0] != cols || t.ne[1] != rows) {
    std::string shape;
    for (int64_t d : t.ne) absl::StrAppend(&shape, shape.empty() ? "" : "x", d);
    return absl::InvalidArgumentError(absl::StrCat(ckpt.path(), ": tensor ", name,
                                                   " has shape [", shape, "], expected [", cols,
                                                   "x", rows, "] (ggml order)"));
  }
  absl::StatusOr<kernels::cpu::GgmlType> type = KernelType(ckpt, name, t.type);
  if (!type.ok()) return type.status();
  if (!kernels::cpu::CanDequantize(*type) || cols % kernels::cpu::BlockElems(*type) != 0) {
    return absl::UnimplementedError(
        absl::StrCat(ckpt.path(), ": tensor ", name, " cannot be used as a weight matrix"));
  }
  kernels::cpu::WeightMatrix w;
  w.type = *type;
  w.rows = rows;
  w.cols = cols;
  w.data = t.data;
  w.row_stride_bytes = kernels::cpu::RowBytes(*type, cols);
  w.float_activations = float_activations;
  if (w.row_stride_bytes * rows != t.nbytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(ckpt.path(), ": tensor ", name, " has an unexpected byte size"));
  }
  return w;
}

bool PackForKernelPlan(const kernels::cpu::KernelPlan& plan, const worker::loader::Checkpoint& ckpt,
                       kernels::cpu::WeightMatrix* w) {
  if (!kernels::cpu::PackForKernelPlan(plan, w)) return false;
  ckpt.ReleaseTensorPages(w->data, w->row_stride_bytes * w->rows);
  return true;
}

std::vector<uint8_t> PrecisePositionMask(const kernels::cpu::KernelPlan& plan,
                                         const std::vector<int32_t>& positions) {
  std::vector<uint8_t> mask;
  if (plan.matmul != kernels::cpu::MatmulKind::kInt16) return mask;
  mask.resize(positions.size());
  for (size_t t = 0; t < positions.size(); ++t) mask[t] = positions[t] < kPrecisePositions;
  return mask;
}

absl::StatusOr<std::vector<float>> LoadVector(const worker::loader::Checkpoint& ckpt,
                                              const std::string& name, int64_t n) {
  absl::StatusOr<const worker::loader::TensorRef*> ref = ckpt.Get(name);
  if (!ref.ok()) return ref.status();
  const worker::loader::TensorRef& t = **ref;
  int64_t count = 1;
  for (int64_t d : t.ne) count *= d;
  if (count != n) {
    return absl::InvalidArgumentError(absl::StrCat(ckpt.path(), ": tensor ", name, " has ",
                                                   count, " elements, expected ", n));
  }
  absl::StatusOr<kernels::cpu::GgmlType> type = KernelType(ckpt, name, t.type);
  if (!type.ok()) return type.status();
  if (!kernels::cpu::CanDequantize(*type) || n % kernels::cpu::BlockElems(*type) != 0) {
    return absl::UnimplementedError(
        absl::StrCat(ckpt.path(), ": tensor ", name, " cannot be read as a vector"));
  }
  std::vector<float> out(n);
  kernels::cpu::DequantizeRow(*type, t.data, out.data(), n);
  return out;
}

void TensorBinder::Matrix(const std::string& name, int64_t rows, int64_t cols,
                          kernels::cpu::WeightMatrix* w) {
  if (!status_.ok()) return;
  bound_.insert(name);
  absl::StatusOr<kernels::cpu::WeightMatrix> m =
      BindMatrix(ckpt_, name, rows, cols, float_activations_);
  if (m.ok()) {
    *w = *m;
  } else {
    status_ = m.status();
  }
}

void TensorBinder::Vector(const std::string& name, int64_t n, std::vector<float>* v) {
  if (!status_.ok()) return;
  bound_.insert(name);
  absl::StatusOr<std::vector<float>> x = LoadVector(ckpt_, name, n);
  if (x.ok()) {
    *v = std::move(*x);
  } else {
    status_ = x.status();
  }
}

absl::Status TensorBinder::CheckEveryLayerTensorBound() const {
  for (const auto& [name, ref] : ckpt_.tensors()) {
    if (absl::StartsWith(name, "blk.") && bound_.count(name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          ckpt_.path(), ": tensor '", name, "' is not used by this architecture (not supported)"));
    }
  }
  return absl::OkStatus();
}

BatchLayout LayoutBatch(const ForwardBatch& batch) {
  BatchLayout layout;
  layout.seq_begin.push_back(0);
  for (const SequenceChunk& seq : batch.sequences) {
    const int64_t begin = layout.num_tokens;
    for (size_t i = 0; i < seq.tokens.size(); ++i) {
      layout.tokens.push_back(seq.tokens[i]);
      layout.positions.push_back(seq.start_pos + static_cast<int32_t>(i));
    }
    layout.num_tokens += seq.tokens.size();
    layout.seq_begin.push_back(layout.num_tokens);
    if (seq.all_logits) {
      for (int64_t r = begin; r < layout.num_tokens; ++r) layout.logit_rows.push_back(r);
    } else {
      layout.logit_rows.push_back(layout.num_tokens - 1);
    }
  }
  return layout;
}

void EmbedTokens(const kernels::cpu::WeightMatrix& table, const std::vector<int32_t>& tokens,
                 float* x, kernels::cpu::ThreadPool* pool) {
  const int64_t width = table.cols;
  pool->ParallelFor(tokens.size(), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      if (table.packed) {
        kernels::cpu::DequantizePackedRow(*table.packed, tokens[t], x + t * width);
        continue;
      }
      const uint8_t* row =
          static_cast<const uint8_t*>(table.data) + tokens[t] * table.row_stride_bytes;
      kernels::cpu::DequantizeRow(table.type, row, x + t * width, width);
    }
  });
}

void WriteKv(const ForwardBatch& batch, const BatchLayout& layout, int layer, const float* k,
             const float* v, PagedKvCache* cache) {
  const KvCacheShape& shape = cache->shape();
  std::vector<int64_t> slots(layout.num_tokens);
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceChunk& seq = batch.sequences[s];
    for (int64_t t = layout.seq_begin[s]; t < layout.seq_begin[s + 1]; ++t) {
      const int32_t pos = layout.positions[t];
      const int64_t block = seq.block_table[pos / shape.block_size];
      slots[t] = block * shape.block_size + pos % shape.block_size;
    }
  }
  kernels::cpu::WriteKvSlots(k, v, layout.num_tokens, slots.data(), shape.num_kv_heads,
                             shape.head_dim, cache->keys(layer), cache->values(layer), shape.dtype);
}

void AttendAll(const ForwardBatch& batch, const BatchLayout& layout, int layer, const float* q,
               int num_heads, PagedKvCache* cache, float* out, kernels::cpu::ThreadPool* pool,
               const AttentionOptions& options) {
  const KvCacheShape& shape = cache->shape();
  const int64_t q_dim = static_cast<int64_t>(num_heads) * shape.head_dim;
  std::vector<kernels::cpu::PagedAttentionArgs> all(batch.sequences.size());
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceChunk& seq = batch.sequences[s];
    const int64_t begin = layout.seq_begin[s];
    kernels::cpu::PagedAttentionArgs& args = all[s];
    args.q = q + begin * q_dim;
    args.out = out + begin * q_dim;
    args.k_cache = cache->keys(layer);
    args.v_cache = cache->values(layer);
    args.kv_dtype = shape.dtype;
    args.block_table = seq.block_table.data();
    args.block_table_len = static_cast<int64_t>(seq.block_table.size());
    args.block_size = shape.block_size;
    args.start_pos = seq.start_pos;
    args.n_q = static_cast<int64_t>(seq.tokens.size());
    args.context_len = args.start_pos + args.n_q;
    args.num_heads = num_heads;
    args.num_kv_heads = shape.num_kv_heads;
    args.head_dim = shape.head_dim;
    args.sliding_window = options.sliding_window;
    args.scale = options.scale;
    args.logit_softcap = options.logit_softcap;
  }
  kernels::cpu::PagedAttentionBatch(all, pool);
}

absl::StatusOr<RotaryTable> RotaryTableFor(const worker::loader::ModelConfig& cfg, bool local) {
  using worker::loader::RopeScaling;
  const int64_t dim = cfg.RopeDim();
  const int64_t half = dim / 2;
  const double theta = local ? cfg.local_rope_theta : cfg.rope_theta;
  const RopeScaling& sc = local ? cfg.local_rope_scaling : cfg.rope_scaling;
  RotaryTable table;
  table.inv_freq.resize(half);
  // LongRoPE: one factor set for the whole model (a per-step choice, as
  // transformers makes it from the longest position, would leave the cached
  // keys rotated with the other set): the long factors when the model is
  // served past its pre-training context.
  const std::vector<double>* ext = nullptr;
  if (sc.type == RopeScaling::Type::kLongrope) {
    const bool long_context = cfg.max_position_embeddings > sc.original_max_position_embeddings;
    ext = long_context ? &sc.long_factor : &sc.short_factor;
    if (static_cast<int64_t>(ext->size()) != half) {
      return absl::InvalidArgumentError(absl::StrCat(
          "longrope ", long_context ? "long" : "short", "_factor has ", ext->size(),
          " entries, expected ", half, " (one per rotary pair)"));
    }
    table.mscale = static_cast<float>(sc.attention_factor);
  }
  for (int64_t i = 0; i < half; ++i) {
    double f = std::pow(theta, -2.0 * i / dim);
    switch (sc.type) {
      case RopeScaling::Type::kNone:
        break;
      case RopeScaling::Type::kLinear:
        f /= sc.factor;
        break;
      case RopeScaling::Type::kLongrope:
        f /= (*ext)[i];
        break;
      case RopeScaling::Type::kLlama3: {
        // Llama 3.1: long wavelengths are slowed by `factor`, short ones
        // kept, and the band in between interpolated smoothly.
        const double old_ctx = static_cast<double>(sc.original_max_position_embeddings);
        const double low_wavelen = old_ctx / sc.low_freq_factor;
        const double high_wavelen = old_ctx / sc.high_freq_factor;
        const double wavelen = 2.0 * M_PI / f;
        if (wavelen > low_wavelen) {
          f /= sc.factor;
        } else if (wavelen >= high_wavelen) {
          const double smooth =
              (old_ctx / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
          f = (1.0 - smooth) * f / sc.factor + smooth * f;
        }
        break;
      }
      default:
        return absl::UnimplementedError(
            "this RoPE scaling type is not supported (supported: none, linear, llama3, longrope)");
    }
    table.inv_freq[i] = static_cast<float>(f);
  }
  return table;
}

absl::StatusOr<std::vector<float>> RopeInverseFrequencies(const worker::loader::ModelConfig& cfg) {
  absl::StatusOr<RotaryTable> table = RotaryTableFor(cfg, false);
  if (!table.ok()) return table.status();
  return std::move(table->inv_freq);
}

void AddBiasRows(float* x, const float* bias, int64_t n_rows, int64_t dim) {
  for (int64_t r = 0; r < n_rows; ++r) kernels::cpu::Add(x + r * dim, bias, dim, x + r * dim);
}

namespace {
// Below this many floats per range a ParallelFor's dispatch (microseconds)
// costs more than the element-wise work it would split.
constexpr int64_t kMinParallelFloats = 8192;
constexpr int64_t kSwiGluBlock = 64;  // a multiple of the 8-float AVX2 step
}  // namespace

void AddRmsNorm(float* x, const float* delta, const float* weight, int64_t n_tokens, int64_t dim,
                float eps, float* out, kernels::cpu::ThreadPool* pool) {
  const int64_t min_rows = std::max<int64_t>(1, kMinParallelFloats / std::max<int64_t>(1, dim));
  kernels::cpu::ParallelFor(pool, n_tokens, min_rows, [&](int64_t begin, int64_t end) {
    float* xb = x + begin * dim;
    if (delta != nullptr) kernels::cpu::Add(xb, delta + begin * dim, (end - begin) * dim, xb);
    if (weight != nullptr)
      kernels::cpu::RmsNorm(xb, weight, end - begin, dim, eps, out + begin * dim);
  });
}

void SwiGluParallel(const float* gate, const float* up, int64_t n, float* out,
                    kernels::cpu::ThreadPool* pool) {
  const int64_t blocks = (n + kSwiGluBlock - 1) / kSwiGluBlock;
  kernels::cpu::ParallelFor(
      pool, blocks, kMinParallelFloats / kSwiGluBlock, [&](int64_t b, int64_t e) {
        const int64_t i0 = b * kSwiGluBlock, i1 = std::min(n, e * kSwiGluBlock);
        kernels::cpu::SwiGlu(gate + i0, up + i0, i1 - i0, out + i0);
      });
}

void GeGluParallel(const float* gate, const float* up, int64_t n, float* out,
                   kernels::cpu::ThreadPool* pool) {
  const int64_t blocks = (n + kSwiGluBlock - 1) / kSwiGluBlock;
  kernels::cpu::ParallelFor(
      pool, blocks, kMinParallelFloats / kSwiGluBlock, [&](int64_t b, int64_t e) {
        const int64_t i0 = b * kSwiGluBlock, i1 = std::min(n, e * kSwiGluBlock);
        kernels::cpu::Gelu(gate + i0, i1 - i0, out + i0);
        for (int64_t i = i0; i < i1; ++i) out[i] *= up[i];
      });
}

void SoftCapLogits(float cap, ForwardOutput* out) {
  for (std::vector<float>& row : out->logits) {
    for (float& v : row) v = cap * std::tanh(v / cap);
  }
}

std::vector<float> GatherLogitRows(const BatchLayout& layout, const float* hidden,
                                   int64_t width) {
  std::vector<float> rows(layout.logit_rows.size() * width);
  for (size_t i = 0; i < layout.logit_rows.size(); ++i) {
    std::memcpy(rows.data() + i * width, hidden + layout.logit_rows[i] * width,
                width * sizeof(float));
  }
  return rows;
}

void ProjectLogits(const ForwardBatch& batch, const std::vector<float>& rows,
                   const kernels::cpu::WeightMatrix& head, ForwardOutput* out,
                   kernels::cpu::ThreadPool* pool) {
  const int64_t n = rows.size() / head.cols;
  // Reused across steps: a fresh 200 KB-per-row buffer every step costs
  // page faults and zeroing, and so do fresh output rows (assign into an
  // existing vector keeps its capacity when callers reuse `out`).
  thread_local std::vector<float> logits;
  if (logits.size() < static_cast<size_t>(n * head.rows)) logits.resize(n * head.rows);
  kernels::cpu::MatMul(head, rows.data(), n, logits.data(), pool);
  out->logits.resize(batch.sequences.size());
  int64_t row = 0;
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const int64_t count = batch.sequences[s].all_logits ? batch.sequences[s].tokens.size() : 1;
    out->logits[s].assign(logits.begin() + row * head.rows,
                          logits.begin() + (row + count) * head.rows);
    row += count;
  }
}

void EmitHiddenStates(const ForwardBatch& batch, const BatchLayout& layout, const float* x,
                      int64_t width, const std::function<void(float*, int64_t)>& final_norm,
                      ForwardOutput* out) {
  out->hidden.assign(batch.sequences.size(), {});
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    if (!batch.sequences[s].return_hidden) continue;
    const int64_t begin = layout.seq_begin[s], n = layout.seq_begin[s + 1] - begin;
    std::vector<float>& rows = out->hidden[s];
    rows.assign(x + begin * width, x + (begin + n) * width);
    final_norm(rows.data(), n);
  }
}

}  // namespace rill::worker
