#include "cli/bench_model_command.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/common_flags.h"
#include "cli/model_session.h"
#include "kernels/cpu/kernel_plan.h"
#include "cli/roofline_report.h"

ABSL_FLAG(int, prompt_tokens, 512, "bench-model: prompt length for the prefill measurement.");
ABSL_FLAG(int, gen_tokens, 128, "bench-model: decode steps per sequence.");
ABSL_FLAG(std::string, batch, "1", "bench-model: comma-separated decode batch sizes.");
ABSL_FLAG(int, decode_context, 0,
          "bench-model: tokens already in each decoding sequence's KV cache (llama-bench's "
          "-d depth); 0 = decode from a 1-token context.");
ABSL_FLAG(bool, roofline, true,
          "bench-model: after the table, the measured FMA / VNNI peaks and bandwidth and what they allow.");
ABSL_FLAG(bool, json, false, "bench-model: one JSON object per batch size instead of a table.");

namespace rill::cli {
namespace {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Resident set size of this process in MiB, from /proc/self/status.
double RssMib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0.0;
}

}  // namespace

int RunBenchModel(int, char**) {
  std::vector<int> batches;
  for (absl::string_view b : absl::StrSplit(absl::GetFlag(FLAGS_batch), ',')) {
    int v;
    if (!absl::SimpleAtoi(b, &v) || v < 1) {
      std::cerr << "error: --batch must be a list of positive integers\n";
      return 1;
    }
    batches.push_back(v);
  }
  const int pp = absl::GetFlag(FLAGS_prompt_tokens), tg = absl::GetFlag(FLAGS_gen_tokens);
  int max_batch = 1;
  for (int b : batches) max_batch = std::max(max_batch, b);
  ModelSessionOptions options;
  options.model = absl::GetFlag(FLAGS_model);
  options.threads = absl::GetFlag(FLAGS_threads);
  const int depth = absl::GetFlag(FLAGS_decode_context);
  if (depth < 0) {
    std::cerr << "error: --decode_context must be >= 0\n";
    return 1;
  }
  options.max_context = std::max(std::max(pp, 16), depth + 1) + tg + 16;
  options.max_sequences = max_batch;
  absl::StatusOr<kernels::cpu::KernelPlan> plan = kernels::cpu::SetUpKernelPlan(MatmulFlag());
  if (!plan.ok()) {
    std::cerr << "error: " << plan.status().message() << "\n";
    return 1;
  }
  options.model_options.kernel_plan = *plan;
  absl::StatusOr<kernels::cpu::KvDtype> kv_dtype =
      worker::ParseKvCacheDtype(absl::GetFlag(FLAGS_kv_cache_dtype));
  if (!kv_dtype.ok()) {
    std::cerr << "error: " << kv_dtype.status().message() << "\n";
    return 1;
  }
  options.kv_cache_dtype = *kv_dtype;
  absl::StatusOr<std::unique_ptr<ModelSession>> opened = ModelSession::Open(options);
  if (!opened.ok()) {
    std::cerr << "error: " << opened.status().message() << "\n";
    return 1;
  }
  ModelSession& s = **opened;
  const int64_t vocab = s.model().config().vocab_size;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(100, static_cast<int32_t>(vocab) - 1);

  // Prefill: one sequence, `pp` tokens in one step (llama-bench's pp test).
  worker::ForwardBatch prefill;
  prefill.sequences.resize(1);
  prefill.sequences[0].block_table = s.BlockTable(0);
  for (int i = 0; i < pp; ++i) prefill.sequences[0].tokens.push_back(token(rng));
  worker::ForwardOutput out;
  if (absl::Status st = s.model().Forward(prefill, &s.cache(), &out); !st.ok()) {  // warm-up
    std::cerr << "error: " << st.message() << "\n";
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  (void)s.model().Forward(prefill, &s.cache(), &out);
  const double pp_tps = pp / Seconds(t0, std::chrono::steady_clock::now());

  if (!absl::GetFlag(FLAGS_json)) {
    std::cout << "kernel plan: " << plan->Describe() << "\n";
    std::cout << absl::StrFormat("%-6s %14s %14s %10s\n", "batch", "pp tok/s", "tg tok/s",
                                 "rss MiB");
  }
  std::vector<DecodeRate> decode_rates;
  for (int b : batches) {
    // Decode: b sequences each with a 1-token context, then `tg` steps of one
    // token each (llama-bench's tg test at batch 1).
    // With --decode_context, each sequence's context is prefilled first
    // (untimed, 512-token chunks), so the steps attend over that many keys.
    for (int i = 0; i < b && depth > 0; ++i) {
      for (int done = 0; done < depth;) {
        worker::ForwardBatch chunk;
        chunk.sequences.resize(1);
        chunk.sequences[0].block_table = s.BlockTable(i);
        chunk.sequences[0].start_pos = done;
        const int n = std::min(512, depth - done);
        for (int j = 0; j < n; ++j) chunk.sequences[0].tokens.push_back(token(rng));
        if (absl::Status st = s.model().Forward(chunk, &s.cache(), &out); !st.ok()) {
          std::cerr << "error: " << st.message() << "\n";
          return 1;
        }
        done += n;
      }
    }
    worker::ForwardBatch step;
    step.sequences.resize(b);
    for (int i = 0; i < b; ++i) {
      step.sequences[i].block_table = s.BlockTable(i);
      step.sequences[i].tokens = {token(rng)};
      step.sequences[i].start_pos = depth;
    }
    (void)s.model().Forward(step, &s.cache(), &out);
    auto d0 = std::chrono::steady_clock::now();
    for (int t = 1; t <= tg; ++t) {
      for (int i = 0; i < b; ++i) {
        step.sequences[i].start_pos = depth + t;
        step.sequences[i].tokens = {token(rng)};
      }
      (void)s.model().Forward(step, &s.cache(), &out);
    }
    const double tg_tps = static_cast<double>(b) * tg / Seconds(d0, std::chrono::steady_clock::now());
    decode_rates.push_back({b, tg_tps});
    if (absl::GetFlag(FLAGS_json)) {
      std::cout << absl::StrFormat(
          "{\"batch\":%d,\"matmul\":\"%s\",\"threads\":%d,\"prompt_tokens\":%d,\"gen_tokens\":%d,"
          "\"pp_tokens_per_s\":%.2f,\"tg_tokens_per_s\":%.2f,\"rss_mib\":%.1f}\n",
          b, kernels::cpu::MatmulKindName(plan->matmul), absl::GetFlag(FLAGS_threads), pp, tg,
          pp_tps, tg_tps, RssMib());
    } else {
      std::cout << absl::StrFormat("%-6d %14.1f %14.1f %10.1f\n", b, pp_tps, tg_tps, RssMib());
    }
  }
  if (absl::GetFlag(FLAGS_roofline) && !absl::GetFlag(FLAGS_json)) {
    PrintRoofline(s.model().checkpoint(), s.pool(), pp, pp_tps, tg, decode_rates, std::cout);
  }
  return 0;
}

}  // namespace rill::cli
