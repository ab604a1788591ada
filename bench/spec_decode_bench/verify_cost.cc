// What verifying a draft costs on this machine: the model's forward for one
// sequence carrying 1 + d tokens (its last token and d draft tokens, logits
// for each, as speculative decoding runs it) at a given context, for
// d = 0 .. --max_draft, rounds interleaved so drift hits every size alike.
// Prints the median milliseconds per size and what each draft token adds,
// in plain decode steps: the price speculative decoding pays per draft
// token (engine/spec_decode/draft_length_choice.h learns it online).
// Usage: bazel-bin/bench/spec_decode_bench/verify_cost --context=300
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "cli/model_session.h"
#include "kernels/cpu/kernel_plan.h"
#include "worker/forward_batch.h"

ABSL_FLAG(std::string, model, "default", "Model name or path.");
ABSL_FLAG(int, threads, 0, "Model threads (0 = all cores).");
ABSL_FLAG(int, context, 300, "Tokens in the sequence's KV cache before the verified ones.");
ABSL_FLAG(int, max_draft, 8, "Largest draft size timed.");
ABSL_FLAG(int, rounds, 40, "Timed forwards per size.");

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main() {
  rill::cli::ModelSessionOptions options;
  options.model = absl::GetFlag(FLAGS_model);
  options.threads = absl::GetFlag(FLAGS_threads);
  const int context = absl::GetFlag(FLAGS_context);
  const int max_draft = absl::GetFlag(FLAGS_max_draft);
  options.max_context = context + max_draft + 16;
  absl::StatusOr<rill::kernels::cpu::KernelPlan> plan = rill::kernels::cpu::SetUpKernelPlan("auto");
  if (!plan.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(plan.status().message()).c_str());
    return 1;
  }
  options.model_options.kernel_plan = *plan;
  auto session = rill::cli::ModelSession::Open(options);
  if (!session.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(session.status().message()).c_str());
    return 1;
  }
  rill::cli::ModelSession& s = **session;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(100, 20000);
  rill::worker::ForwardOutput out;
  rill::worker::ForwardBatch prefill;
  prefill.sequences.resize(1);
  prefill.sequences[0].block_table = s.BlockTable(0);
  for (int i = 0; i < context; ++i) prefill.sequences[0].tokens.push_back(token(rng));
  if (absl::Status st = s.model().Forward(prefill, &s.cache(), &out); !st.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  std::vector<std::vector<double>> ms(max_draft + 1);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  for (int round = -1; round < rounds; ++round) {  // Round -1 warms up.
    for (int d = 0; d <= max_draft; ++d) {
      rill::worker::ForwardBatch step;
      step.sequences.resize(1);
      rill::worker::SequenceChunk& seq = step.sequences[0];
      seq.block_table = s.BlockTable(0);
      seq.start_pos = context;
      for (int i = 0; i <= d; ++i) seq.tokens.push_back(token(rng));
      seq.all_logits = d > 0;
      const auto t0 = std::chrono::steady_clock::now();
      (void)s.model().Forward(step, &s.cache(), &out);
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (round >= 0) ms[d].push_back(t);
    }
  }
  const double one = Median(ms[0]);
  std::printf("context %d, median of %d forwards each\n%-6s %8s %14s %18s\n", context, rounds,
              "draft", "ms", "x decode step", "per draft token");
  for (int d = 0; d <= max_draft; ++d) {
    const double t = Median(ms[d]);
    std::printf("%-6d %8.3f %14.2f %18s\n", d, t, t / one,
                d == 0 ? "-" : absl::StrFormat("%.3f", (t / one - 1.0) / d).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Main();
}
