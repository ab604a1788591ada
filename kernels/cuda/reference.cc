#include "kernels/cuda/reference.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/cuda/sampling_rng.h"

namespace rill::kernels::cuda::ref {

float ToFloat(Bf16 b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

Bf16 ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<Bf16>(u >> 16);
}

std::vector<float> ToFloat(const std::vector<Bf16>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = ToFloat(v[i]);
  return r;
}

std::vector<Bf16> ToBf16(const std::vector<float>& v) {
  std::vector<Bf16> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = ToBf16(v[i]);
  return r;
}

void RmsNormResidual(const Bf16* x, Bf16* residual, const Bf16* weight, Bf16* out, int rows,
                     int hidden, float eps) {
  for (int r = 0; r < rows; ++r) {
    Bf16* res = residual + static_cast<size_t>(r) * hidden;
    double ss = 0;
    for (int i = 0; i < hidden; ++i) {
      if (x) res[i] = ToBf16(ToFloat(res[i]) + ToFloat(x[static_cast<size_t>(r) * hidden + i]));
      const float v = ToFloat(res[i]);
      ss += static_cast<double>(v) * v;
    }
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / hidden) + eps);
    for (int i = 0; i < hidden; ++i) {
      out[static_cast<size_t>(r) * hidden + i] = ToBf16(ToFloat(res[i]) * inv * ToFloat(weight[i]));
    }
  }
}

void Rope(Bf16* q, Bf16* k, const int32_t* positions, const float* inv_freq, int tokens,
          int q_heads, int kv_heads, int head_dim, int rotary_dim, bool neox) {
  const int half = rotary_dim / 2;
  for (int t = 0; t < tokens; ++t) {
    for (int h = 0; h < q_heads + kv_heads; ++h) {
      Bf16* base = h < q_heads ? q + (static_cast<size_t>(t) * q_heads + h) * head_dim
                               : k + (static_cast<size_t>(t) * kv_heads + h - q_heads) * head_dim;
      for (int i = 0; i < half; ++i) {
        const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const double ang = static_cast<double>(static_cast<float>(positions[t]) * inv_freq[i]);
        const float c = static_cast<float>(std::cos(ang)), s = static_cast<float>(std::sin(ang));
        const float x0 = ToFloat(base[a]), x1 = ToFloat(base[b]);
        base[a] = ToBf16(x0 * c - x1 * s);
        base[b] = ToBf16(x1 * c + x0 * s);
      }
    }
  }
}

void SwiGlu(const Bf16* gate_up, Bf16* out, int rows, int ffn) {
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < ffn; ++i) {
      const float g = ToFloat(gate_up[static_cast<size_t>(r) * 2 * ffn + i]);
      const float u = ToFloat(gate_up[static_cast<size_t>(r) * 2 * ffn + ffn + i]);
      out[static_cast<size_t>(r) * ffn + i] = ToBf16(g / (1.0f + std::exp(-g)) * u);
    }
  }
}

void Gelu(const Bf16* in, Bf16* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = ToFloat(in[i]);
    out[i] = ToBf16(0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x))));
  }
}

void EmbeddingLookup(const int32_t* tokens, const Bf16* table, Bf16* out, int n, int hidden,
                     int vocab) {
  for (int t = 0; t < n; ++t) {
    const bool valid = tokens[t] >= 0 && tokens[t] < vocab;
    for (int i = 0; i < hidden; ++i) {
      out[static_cast<size_t>(t) * hidden + i] =
          valid ? table[static_cast<size_t>(tokens[t]) * hidden + i] : 0;
    }
  }
}

void KvCacheWrite(const Bf16* k, const Bf16* v, Bf16* k_cache, Bf16* v_cache,
                  const int32_t* slot_mapping, int tokens, int kv_heads, int head_dim) {
  const size_t width = static_cast<size_t>(kv_heads) * head_dim;
  for (int t = 0; t < tokens; ++t) {
    if (slot_mapping[t] < 0) continue;
    std::memcpy(k_cache + slot_mapping[t] * width, k + t * width, width * sizeof(Bf16));
    std::memcpy(v_cache + slot_mapping[t] * width, v + t * width, width * sizeof(Bf16));
  }
}

void Attend(const Bf16* q, const Bf16* k_cache, const Bf16* v_cache, const int32_t* block_table,
            int end, int head, const PagedAttentionShape& s, float* out) {
  const float scale = s.scale > 0 ? s.scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const int kv_head = head / (s.q_heads / s.kv_heads);
  auto row = [&](int key) {
    const size_t blk = block_table[key / s.block_size];
    return ((blk * s.block_size + key % s.block_size) * s.kv_heads + kv_head) * s.head_dim;
  };
  std::vector<double> score(end);
  double mx = -DBL_MAX;
  for (int key = 0; key < end; ++key) {
    double dot = 0;
    for (int i = 0; i < s.head_dim; ++i) dot += ToFloat(q[i]) * ToFloat(k_cache[row(key) + i]);
    score[key] = dot * scale;
    mx = std::max(mx, score[key]);
  }
  double z = 0;
  for (int key = 0; key < end; ++key) z += (score[key] = std::exp(score[key] - mx));
  for (int d = 0; d < s.head_dim; ++d) {
    double acc = 0;
    for (int key = 0; key < end; ++key) acc += score[key] * ToFloat(v_cache[row(key) + d]);
    out[d] = end > 0 ? static_cast<float>(acc / z) : 0.0f;
  }
}

void PagedAttentionDecode(const Bf16* q, const Bf16* k_cache, const Bf16* v_cache,
                          const int32_t* block_tables, const int32_t* context_lens, float* out,
                          int seqs, const PagedAttentionShape& s) {
  for (int b = 0; b < seqs; ++b) {
    for (int h = 0; h < s.q_heads; ++h) {
      const size_t o = (static_cast<size_t>(b) * s.q_heads + h) * s.head_dim;
      Attend(q + o, k_cache, v_cache, block_tables + static_cast<size_t>(b) * s.max_blocks_per_seq,
             context_lens[b], h, s, out + o);
    }
  }
}

void PagedAttentionPrefill(const Bf16* q, const Bf16* k_cache, const Bf16* v_cache,
                           const int32_t* block_tables, const int32_t* query_start,
                           const int32_t* context_lens, float* out, int seqs,
                           const PagedAttentionShape& s) {
  for (int b = 0; b < seqs; ++b) {
    const int n = query_start[b + 1] - query_start[b];
    for (int i = 0; i < n; ++i) {
      const int t = query_start[b] + i;
      for (int h = 0; h < s.q_heads; ++h) {
        const size_t o = (static_cast<size_t>(t) * s.q_heads + h) * s.head_dim;
        Attend(q + o, k_cache, v_cache,
               block_tables + static_cast<size_t>(b) * s.max_blocks_per_seq,
               context_lens[b] - n + i + 1, h, s, out + o);
      }
    }
  }
}

void Gemm(const Bf16* x, const Bf16* w, float* y, int m, int n, int k) {
  std::vector<float> xf(static_cast<size_t>(m) * k), wf(static_cast<size_t>(n) * k);
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = ToFloat(x[i]);
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = ToFloat(w[i]);
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < n; ++c) {
      double acc = 0;
      for (int i = 0; i < k; ++i)
        acc += xf[static_cast<size_t>(r) * k + i] * wf[static_cast<size_t>(c) * k + i];
      y[static_cast<size_t>(r) * n + c] = static_cast<float>(acc);
    }
  }
}

int32_t Sample(const float* logits, const SamplingParams& p, int vocab, std::vector<bool>* kept) {
  if (!(p.temperature > 0.0f)) {
    int best = 0;
    for (int i = 1; i < vocab; ++i) {
      if (logits[i] > logits[best]) best = i;
    }
    if (kept) {
      kept->assign(vocab, false);
      (*kept)[best] = true;
    }
    return best;
  }
  std::vector<float> l(vocab), prob(vocab);
  float mx = -FLT_MAX;
  for (int i = 0; i < vocab; ++i) mx = std::max(mx, l[i] = logits[i] / p.temperature);
  std::vector<bool> keep(vocab, true);
  if (p.top_k > 0 && p.top_k < vocab) {
    std::vector<float> sorted(l);
    std::nth_element(sorted.begin(), sorted.begin() + (p.top_k - 1), sorted.end(),
                     std::greater<float>());
    const float kth = sorted[p.top_k - 1];
    for (int i = 0; i < vocab; ++i) keep[i] = l[i] >= kth;
  }
  const float min_p = p.min_p > 0 ? p.min_p : 0.0f;
  for (int i = 0; i < vocab; ++i) {
    prob[i] = std::exp(l[i] - mx);
    keep[i] = keep[i] && prob[i] >= min_p;
  }
  if (p.top_p < 1.0f) {
    double z = 0;
    std::vector<int> order;
    for (int i = 0; i < vocab; ++i) {
      if (keep[i]) {
        z += prob[i];
        order.push_back(i);
      }
    }
    std::sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    // Keep every token whose logit is >= the smallest one needed to reach top_p.
    double mass = 0;
    float cutoff = l[order.front()];
    for (int i : order) {
      if (mass >= p.top_p * z) break;
      mass += prob[i];
      cutoff = l[i];
    }
    for (int i = 0; i < vocab; ++i) keep[i] = keep[i] && l[i] >= cutoff;
  }
  double total = 0;
  int last = 0;
  for (int i = 0; i < vocab; ++i) {
    if (keep[i]) {
      total += prob[i];
      last = i;
    }
  }
  const double u01 =
      p.uniform >= 0.0 ? p.uniform : static_cast<double>(SampleUniform(p.seed, p.step));
  const double u = u01 * total;
  if (kept) *kept = keep;
  if (p.descending) {
    std::vector<int> order;
    for (int i = 0; i < vocab; ++i) {
      if (keep[i]) order.push_back(i);
    }
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    double run = 0;
    for (int i : order) {
      run += prob[i];
      if (run > u) return i;
    }
    return order.back();
  }
  double run = 0;
  int chosen = last;
  for (int i = 0; i < vocab; ++i) {
    if (!keep[i]) continue;
    run += prob[i];
    if (run > u) {
      chosen = i;
      break;
    }
  }
  return chosen;
}

void SplitQkv(const Bf16* qkv, const Bf16* bias, Bf16* q, Bf16* k, Bf16* v, int tokens, int q_dim,
              int kv_dim) {
  const int width = q_dim + 2 * kv_dim;
  for (int t = 0; t < tokens; ++t) {
    for (int j = 0; j < width; ++j) {
      const Bf16 x = qkv[static_cast<size_t>(t) * width + j];
      const Bf16 y = bias ? ToBf16(ToFloat(x) + ToFloat(bias[j])) : x;
      if (j < q_dim) {
        q[static_cast<size_t>(t) * q_dim + j] = y;
      } else if (j < q_dim + kv_dim) {
        k[static_cast<size_t>(t) * kv_dim + j - q_dim] = y;
      } else {
        v[static_cast<size_t>(t) * kv_dim + j - q_dim - kv_dim] = y;
      }
    }
  }
}

void ApplyLogitEdits(float* logits, const LogitEdit* edits, const int32_t* offsets, int rows,
                     int vocab) {
  for (int r = 0; r < rows; ++r) {
    float* lg = logits + static_cast<size_t>(r) * vocab;
    for (int e = offsets[r]; e < offsets[r + 1]; ++e) {
      const LogitEdit& ed = edits[e];
      if (ed.token < 0 || ed.token >= vocab) continue;
      lg[ed.token] = EditedLogit(lg[ed.token], ed.repetition, ed.subtract, ed.add, ed.mask != 0);
    }
  }
}

std::vector<std::pair<int32_t, float>> TopLogprobs(const float* logits, int k, int vocab) {
  auto key = [&](int i) { return std::isnan(logits[i]) ? -INFINITY : logits[i]; };
  std::vector<int> order(vocab);
  for (int i = 0; i < vocab; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return key(a) > key(b) || (key(a) == key(b) && a < b); });
  std::vector<std::pair<int32_t, float>> out;
  for (int j = 0; j < std::min(k, vocab); ++j) {
    out.emplace_back(order[j], Logprob(logits, order[j], vocab));
  }
  return out;
}

float Logprob(const float* logits, int32_t token, int vocab) {
  if (token < 0 || token >= vocab) return -INFINITY;
  double mx = -DBL_MAX, z = 0;
  for (int i = 0; i < vocab; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  for (int i = 0; i < vocab; ++i) z += std::exp(logits[i] - mx);
  return static_cast<float>(logits[token] - mx - std::log(z));
}

}  // namespace rill::kernels::cuda::ref
