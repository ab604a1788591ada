// Standalone checker of the CUDA kernels (no gtest, no absl: it also builds
// with CMake on a bare GPU box). Runs every kernel against its CPU reference
// on fresh random inputs, then the decode micro-benchmark, and prints a
// summary table last. Without a usable device it prints
// "skipped: no CUDA device" and exits 0.
//
//   cuda_kernel_check [--seed=N] [--no-bench] [--iterations=N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/check/decode_bench.h"
#include "kernels/cuda/check/kernel_checks.h"

namespace {

using rill::kernels::cuda::check::Row;

void PrintRow(const Row& r) {
  const char* status =
      r.metric == "tokens/s" ? (r.pass ? "OK  " : "FAIL") : (r.pass ? "PASS" : "FAIL");
  printf("%-4s  %-46s %-14s %-10.3g %s\n", status, r.name.c_str(), r.metric.c_str(), r.error,
         r.note.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  unsigned seed = std::random_device{}();
  bool bench = true;
  rill::kernels::cuda::check::BenchConfig config;
  for (int i = 1; i < argc; ++i) {
    if (!strncmp(argv[i], "--seed=", 7)) {
      seed = static_cast<unsigned>(strtoul(argv[i] + 7, nullptr, 10));
    } else if (!strcmp(argv[i], "--no-bench")) {
      bench = false;
    } else if (!strncmp(argv[i], "--iterations=", 13)) {
      config.iterations = atoi(argv[i] + 13) > 0 ? atoi(argv[i] + 13) : config.iterations;
    } else {
      fprintf(stderr, "unknown flag %s\nusage: %s [--seed=N] [--no-bench] [--iterations=N]\n",
              argv[i], argv[0]);
      return 2;
    }
  }
  const int devices = rill::kernels::cuda::DeviceCountOrError();
  if (devices <= 0) {
    printf("skipped: no CUDA device\n");
    return 0;
  }
  char name[256] = "?";
  rill::kernels::cuda::DeviceName(name, sizeof(name));
  printf("device: %s, seed %u (rerun with --seed=%u)\n", name, seed, seed);
  std::mt19937 rng(seed);
  std::vector<Row> rows;
  auto add = [&](std::vector<Row> more) {
    for (auto& r : more) {
      PrintRow(r);
      rows.push_back(std::move(r));
    }
  };
  add(rill::kernels::cuda::check::CheckElementwise(rng));
  add(rill::kernels::cuda::check::CheckAttention(rng));
  add(rill::kernels::cuda::check::CheckGemm(rng));
  add(rill::kernels::cuda::check::CheckSampling(rng));
  if (bench) add(rill::kernels::cuda::check::RunDecodeBench(config));
  int failed = 0;
  for (const auto& r : rows) failed += !r.pass;
  printf("\n==== summary (%s, seed %u) ====\n", name, seed);
  printf("%-4s  %-46s %-14s %-10s %s\n", "", "check", "metric", "value", "note");
  for (const auto& r : rows) PrintRow(r);
  printf("%d of %zu checks failed\n", failed, rows.size());
  return failed ? 1 : 0;
}
