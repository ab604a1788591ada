#include "worker/models/cuda/sampling_arrays.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace rill::worker {

namespace kc = ::rill::kernels::cuda;

absl::Status ValidateDeviceSampling(const ForwardBatch& batch) {
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const SequenceChunk& seq = batch.sequences[i];
    if (!seq.device_sampling.has_value()) continue;
    const DeviceSampling& d = *seq.device_sampling;
    auto bad = [i](auto... what) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": device_sampling ", what...));
    };
    if (seq.all_logits) return bad("with all_logits (its logits are returned)");
    if (!(d.temperature >= 0.0f) || !std::isfinite(d.temperature)) {
      return bad("temperature must be finite and >= 0, got ", d.temperature);
    }
    if (!(d.top_p > 0.0f && d.top_p <= 1.0f)) return bad("top_p must be in (0, 1], got ", d.top_p);
    if (!(d.min_p >= 0.0f && d.min_p <= 1.0f)) return bad("min_p must be in [0, 1], got ", d.min_p);
    if (!(d.uniform >= 0.0 && d.uniform < 1.0)) {
      return bad("uniform must be in [0, 1), got ", d.uniform);
    }
    if (d.top_logprobs < 0 || d.top_logprobs > kc::kMaxTopLogprobs) {
      return bad("top_logprobs must be in [0, ", kc::kMaxTopLogprobs, "], got ", d.top_logprobs);
    }
  }
  return absl::OkStatus();
}

kc::SamplingParams KernelParams(const DeviceSampling& d) {
  kc::SamplingParams p;
  p.temperature = d.temperature;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.min_p = d.min_p;
  p.uniform = d.uniform;
  p.descending = d.descending_draw ? 1 : 0;
  return p;
}

SamplingArrays BuildSamplingArrays(const ForwardBatch& batch,
                                   const std::vector<int32_t>& logits_per_seq) {
  SamplingArrays s;
  s.device_row.assign(batch.sequences.size(), -1);
  s.edit_offsets.push_back(0);
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const std::optional<DeviceSampling>& d = batch.sequences[i].device_sampling;
    for (int32_t j = 0; j < logits_per_seq[i]; ++j) {
      kc::SamplingParams& p = s.params.emplace_back();
      if (d.has_value()) {
        s.device_row[i] = static_cast<int32_t>(s.params.size() - 1);
        ++s.num_device_rows;
        p = KernelParams(*d);
        s.top_logprobs.push_back(d->top_logprobs);
        s.max_top_logprobs = std::max(s.max_top_logprobs, d->top_logprobs);
        for (const LogitEdit& e : d->edits) {
          s.edits.push_back({e.token, e.repetition, e.subtract, e.add, e.mask ? 1 : 0});
        }
      } else {
        p.temperature = 0.0f;  // cheapest; the result is dropped
        s.top_logprobs.push_back(0);
      }
      s.host_row.push_back(!d.has_value());
      s.edit_offsets.push_back(static_cast<int32_t>(s.edits.size()));
    }
  }
  return s;
}

std::vector<DeviceSampledToken> SampledTokens(const SamplingArrays& s,
                                              const std::vector<int32_t>& row_tokens,
                                              const std::vector<float>& row_logprobs,
                                              const std::vector<int32_t>& top_ids,
                                              const std::vector<float>& top_logprobs) {
  std::vector<DeviceSampledToken> out;
  if (s.num_device_rows == 0) return out;
  out.resize(s.device_row.size());
  for (size_t i = 0; i < s.device_row.size(); ++i) {
    const int32_t r = s.device_row[i];
    if (r < 0) continue;
    out[i].token = row_tokens[r];
    out[i].logprob = row_logprobs[r];
    const size_t at = static_cast<size_t>(r) * kc::kMaxTopLogprobs;
    for (int j = 0; j < s.top_logprobs[r] && at + j < top_ids.size(); ++j) {
      out[i].top.emplace_back(top_ids[at + j], top_logprobs[at + j]);
    }
  }
  return out;
}

}  // namespace rill::worker
