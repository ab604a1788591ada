#include "cli/roofline_report.h"

#include "absl/strings/str_format.h"
#include "kernels/cpu/peak_rate.h"
#include "worker/models/flop_count.h"

namespace rill::cli {

void PrintRoofline(const worker::loader::Checkpoint& checkpoint, kernels::cpu::ThreadPool* pool,
                   int prompt_tokens, double pp_tokens_per_s, int gen_tokens,
                   const std::vector<DecodeRate>& decode, std::ostream& out) {
  // About half a second each: long enough to reach the boost clock.
  const double fma = kernels::cpu::MeasureF32FmaPeak(pool, 200'000'000).per_second();
  const double vnni = kernels::cpu::MeasureInt16VnniPeak(pool, 100'000'000).per_second();
  const double bw = kernels::cpu::MeasureReadBandwidth(pool, int64_t{512} << 20, 4).per_second();
  const worker::loader::ModelConfig& c = checkpoint.config();
  const double mm_flops = 2.0 * worker::MatMulMacsPerToken(checkpoint);
  double weight_bytes = 0;  // what a decode step streams
  for (const worker::loader::TensorRef* t : worker::MatMulWeights(checkpoint))
    weight_bytes += t->nbytes;
  const int threads = pool ? pool->num_threads() : 1;

  out << absl::StrFormat("\nroofline (measured in this run, %d threads)\n", threads);
  out << absl::StrFormat("  f32 FMA peak %.1f GFLOP/s, int16 VNNI peak %.1f Gop/s, read bandwidth %.1f GB/s\n",
                         fma * 1e-9, vnni * 1e-9, bw * 1e-9);
  out << absl::StrFormat("  matmul work %.1f MFLOP/token, weights %.1f MiB\n", mm_flops * 1e-6,
                         weight_bytes / (1 << 20));
  if (fma <= 0) return;
  const double pp_flops = mm_flops + 2.0 * worker::AttentionMacsPerToken(c, prompt_tokens / 2);
  out << absl::StrFormat("  prefill %d: %.1f GFLOP/s = %.0f%% of the f32 FMA peak\n", prompt_tokens,
                         pp_tokens_per_s * pp_flops * 1e-9, 100.0 * pp_tokens_per_s * pp_flops / fma);
  const double step_flops = mm_flops + 2.0 * worker::AttentionMacsPerToken(c, gen_tokens / 2);
  const double ceiling = fma / step_flops;  // decode tok/s if every flop ran at the FMA peak
  out << absl::StrFormat("  %-6s %10s %10s %9s %16s\n", "batch", "tg tok/s", "GFLOP/s", "% peak",
                         "x batch 1");
  double batch1 = 0;
  for (const DecodeRate& d : decode) {
    if (d.batch == 1) batch1 = d.tokens_per_s;
  }
  for (const DecodeRate& d : decode) {
    out << absl::StrFormat("  %-6d %10.1f %10.1f %8.0f%% %16s\n", d.batch, d.tokens_per_s,
                           d.tokens_per_s * step_flops * 1e-9, 100.0 * d.tokens_per_s / ceiling,
                           batch1 > 0 ? absl::StrFormat("%.2fx", d.tokens_per_s / batch1) : "");
  }
  if (batch1 > 0) {
    out << absl::StrFormat(
        "  ceiling at the f32 FMA peak: %.0f tok/s = %.2fx the measured batch 1"
        " (at the int16 VNNI peak: %.2fx)\n",
        ceiling, ceiling / batch1, vnni / step_flops / batch1);
  }
  out << absl::StrFormat("  batch-1 floor from bandwidth: %.0f tok/s (weights / read bandwidth)\n",
                         bw / weight_bytes);
}

}  // namespace rill::cli
