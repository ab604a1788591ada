#include "worker/models/cuda/device_sampling_check.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/reference.h"
#include "worker/models/cuda/sampling_arrays.h"
#include "worker/sampling_spec.h"

namespace rill::worker {
namespace {

namespace kc = ::rill::kernels::cuda;

constexpr int kSeqs = 6;
constexpr int kPromptTokens = 20;
constexpr int kBlocksPerSeq = 2;  // block size 16: the prompt plus one decode token

// Row r's sampling; the last row stays on the host.
std::optional<DeviceSampling> SpecFor(int r, std::mt19937& rng, int vocab) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  DeviceSampling d;
  d.uniform = u(rng);
  switch (r) {
    case 0:
      d.temperature = 0.0f;
      break;
    case 1:  // greedy under edits: a bias that wins, a masked token
      d.temperature = 0.0f;
      d.edits = {{3, 1.0f, 0.0f, 0.0f, true}, {7, 1.0f, 0.0f, 100.0f, false}};
      d.top_logprobs = 5;
      break;
    case 2:
      d.temperature = 1.0f;
      break;
    case 3:
      d.temperature = 0.8f;
      d.top_k = 40;
      d.top_p = 0.9f;
      d.descending_draw = true;
      d.top_logprobs = 20;
      break;
    case 4:
      d.temperature = 1.2f;
      d.min_p = 0.05f;
      for (int t = 0; t < 64; ++t) {
        d.edits.push_back({t * 97 % vocab, 1.3f, 0.2f * (t % 3), t % 5 == 0 ? -1.0f : 0.0f,
                           false});
      }
      break;
    default:
      return std::nullopt;
  }
  return d;
}

struct Tally {
  int greedy = 0, greedy_same = 0, sampled = 0, sampled_same = 0, logprob_off = 0;
  int top_rows = 0, top_same = 0;
  bool host_rows_equal = true;
  bool shape_ok = true;
};

// Compares `with` (device sampling) to the reference over `plain`'s logits.
void Compare(const ForwardBatch& batch, const ForwardOutput& plain, const ForwardOutput& with,
             int vocab, Tally* t) {
  if (with.sampled.size() != batch.sequences.size() ||
      with.logits.size() != batch.sequences.size()) {
    t->shape_ok = false;
    return;
  }
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const std::optional<DeviceSampling>& d = batch.sequences[s].device_sampling;
    if (!d.has_value()) {
      t->host_rows_equal = t->host_rows_equal && with.logits[s] == plain.logits[s] &&
                           with.sampled[s].token == -1;
      continue;
    }
    if (!with.logits[s].empty()) t->shape_ok = false;
    std::vector<float> row = plain.logits[s];
    ApplyLogitEdits(d->edits, row.data(), vocab);
    const int32_t want = kc::ref::Sample(row.data(), KernelParams(*d), vocab);
    const int32_t got = with.sampled[s].token;
    const bool same = got == want;
    if (d->temperature == 0.0f) {
      ++t->greedy;
      t->greedy_same += same;
    } else {
      ++t->sampled;
      t->sampled_same += same;
    }
    if (got >= 0 && got < vocab &&
        std::fabs(kc::ref::Logprob(row.data(), got, vocab) - with.sampled[s].logprob) > 1e-3) {
      ++t->logprob_off;
    }
    const std::vector<std::pair<int32_t, float>> top =
        kc::ref::TopLogprobs(row.data(), d->top_logprobs, vocab);
    bool top_same = top.size() == with.sampled[s].top.size();
    for (size_t j = 0; top_same && j < top.size(); ++j) {
      top_same = top[j].first == with.sampled[s].top[j].first &&
                 std::fabs(top[j].second - with.sampled[s].top[j].second) <= 1e-3;
    }
    t->top_rows += d->top_logprobs > 0;
    t->top_same += d->top_logprobs > 0 && top_same;
    if (!top_same && d->top_logprobs == 0) t->shape_ok = false;
  }
}

bool Report(const char* what, const Tally& t) {
  const bool pass = t.shape_ok && t.host_rows_equal && t.greedy_same == t.greedy &&
                    t.sampled - t.sampled_same <= 1 && t.logprob_off == 0 &&
                    t.top_same == t.top_rows;
  printf("device sampling, %-14s greedy %d/%d, sampled %d/%d as the reference, logprobs off %d, "
         "top logprobs %d/%d, host row %s, shapes %s: %s\n",
         what, t.greedy_same, t.greedy, t.sampled_same, t.sampled, t.logprob_off, t.top_same,
         t.top_rows,
         t.host_rows_equal ? "bitwise" : "DIFFERS", t.shape_ok ? "ok" : "WRONG",
         pass ? "PASS" : "FAIL");
  return pass;
}

}  // namespace

absl::StatusOr<bool> CheckDeviceSampling(CudaLlama* gpu, int first_block, uint32_t seed) {
  const int vocab = static_cast<int>(gpu->config().vocab_size);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
  ForwardBatch prefill, decode;
  for (int s = 0; s < kSeqs; ++s) {
    SequenceChunk c;
    for (int i = 0; i < kPromptTokens; ++i) c.tokens.push_back(tok(rng));
    for (int b = 0; b < kBlocksPerSeq; ++b) c.block_table.push_back(first_block + s * kBlocksPerSeq + b);
    SequenceChunk d;
    d.tokens = {tok(rng)};
    d.start_pos = kPromptTokens;
    d.block_table = c.block_table;
    prefill.sequences.push_back(std::move(c));
    decode.sequences.push_back(std::move(d));
  }
  bool pass = true;
  for (ForwardBatch* batch : {&prefill, &decode}) {
    // The same batch twice writes the same K/V at the same slots, so both
    // runs see the same cache and give the same logits.
    ForwardOutput plain, with;
    if (absl::Status s = gpu->Forward(*batch, &plain); !s.ok()) return s;
    if (!plain.sampled.empty()) return absl::InternalError("sampled tokens without device_sampling");
    for (int s = 0; s < kSeqs; ++s) batch->sequences[s].device_sampling = SpecFor(s, rng, vocab);
    if (absl::Status s = gpu->Forward(*batch, &with); !s.ok()) return s;
    Tally t;
    Compare(*batch, plain, with, vocab, &t);
    pass = Report(batch == &prefill ? "prefill/eager" : "decode/graph", t) && pass;
    for (SequenceChunk& c : batch->sequences) c.device_sampling.reset();
  }
  return pass;
}

}  // namespace rill::worker
