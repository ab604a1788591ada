#include "worker/models/cuda/tp_shard.h"

#include <glog/logging.h>

namespace rill::worker {

std::vector<IndexRange> QkvRowsOfRank(const worker::loader::ModelConfig& c, const TpPartition& p) {
  const int64_t hd = c.head_dim, q_dim = c.num_heads * hd, kv_dim = c.num_kv_heads * hd;
  const IndexRange kv{p.kv_head_begin * hd, p.kv_head_end * hd};
  return {{p.q_head_begin * hd, p.q_head_end * hd},
          {q_dim + kv.begin, q_dim + kv.end},
          {q_dim + kv_dim + kv.begin, q_dim + kv_dim + kv.end}};
}

std::vector<IndexRange> GateUpRowsOfRank(const worker::loader::ModelConfig& c,
                                         const TpPartition& p) {
  const int64_t f = c.intermediate_size;
  return {{p.ffn_begin, p.ffn_end}, {f + p.ffn_begin, f + p.ffn_end}};
}

IndexRange OColsOfRank(const worker::loader::ModelConfig& c, const TpPartition& p) {
  return {p.q_head_begin * c.head_dim, p.q_head_end * c.head_dim};
}

IndexRange DownColsOfRank(const TpPartition& p) { return {p.ffn_begin, p.ffn_end}; }

std::vector<uint16_t> TakeRows(const std::vector<uint16_t>& m, int64_t cols,
                               const std::vector<IndexRange>& rows) {
  std::vector<uint16_t> out;
  for (const IndexRange& r : rows) {
    CHECK(0 <= r.begin && r.begin <= r.end && static_cast<size_t>(r.end * cols) <= m.size())
        << "rows [" << r.begin << ", " << r.end << ") of a " << m.size() / cols << "-row matrix";
    out.insert(out.end(), m.begin() + r.begin * cols, m.begin() + r.end * cols);
  }
  return out;
}

std::vector<uint16_t> TakeCols(const std::vector<uint16_t>& m, int64_t width, IndexRange cols) {
  CHECK(0 <= cols.begin && cols.begin <= cols.end && cols.end <= width && m.size() % width == 0)
      << "columns [" << cols.begin << ", " << cols.end << ") of a " << width << "-column matrix";
  const int64_t rows = static_cast<int64_t>(m.size()) / width;
  std::vector<uint16_t> out;
  out.reserve(static_cast<size_t>(rows * cols.size()));
  for (int64_t r = 0; r < rows; ++r) {
    out.insert(out.end(), m.begin() + r * width + cols.begin, m.begin() + r * width + cols.end);
  }
  return out;
}

LayerBf16 ShardLayerBf16(const LayerBf16& full, const worker::loader::ModelConfig& c,
                         const TpPartition& p) {
  const std::vector<IndexRange> qkv_rows = QkvRowsOfRank(c, p);
  LayerBf16 s;
  s.attn_norm = full.attn_norm;
  s.ffn_norm = full.ffn_norm;
  s.qkv = TakeRows(full.qkv, c.hidden_size, qkv_rows);
  if (!full.qkv_bias.empty()) s.qkv_bias = TakeRows(full.qkv_bias, 1, qkv_rows);
  s.o = TakeCols(full.o, c.num_heads * c.head_dim, OColsOfRank(c, p));
  s.gate_up = TakeRows(full.gate_up, c.hidden_size, GateUpRowsOfRank(c, p));
  s.down = TakeCols(full.down, c.intermediate_size, DownColsOfRank(p));
  return s;
}

}  // namespace rill::worker
