// Microseconds per sampled row for the sampler's configurations, on a
// 49,152-token vocabulary (SmolLM2's): what each running sequence costs the
// engine per step outside the forward pass. Two logit rows: "peaked" (a
// clear favourite over N(0, 3) noise, as a model that knows the next token)
// and "flat" (N(0, 1.5): the nucleus holds thousands of tokens).
//
//   bazel run -c opt //bench/engine_bench:sampler_bench
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "worker/sampler.h"

ABSL_FLAG(int, vocab, 49152, "Vocabulary size.");
ABSL_FLAG(int, rows, 2000, "Rows sampled per configuration.");
ABSL_FLAG(std::string, only, "", "Run only the configurations whose name contains this.");

namespace {

std::vector<float> Row(int n, float stddev, float favourite_boost, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, stddev);
  std::vector<float> row(n);
  for (float& x : row) x = noise(rng);
  row[n / 3] += favourite_boost;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_vocab), rows = absl::GetFlag(FLAGS_rows);
  struct Config {
    const char* name;
    rill::worker::SamplingConfig c;
  };
  auto cfg = [](float t, int k, float p, float min_p) {
    rill::worker::SamplingConfig c;
    c.temperature = t;
    c.top_k = k;
    c.top_p = p;
    c.min_p = min_p;
    c.seed = 7;
    return c;
  };
  const Config configs[] = {
      {"greedy", cfg(0.0f, 0, 1.0f, 0.0f)},
      {"temperature 0.7", cfg(0.7f, 0, 1.0f, 0.0f)},
      {"temperature 1, top_p 0.95", cfg(1.0f, 0, 0.95f, 0.0f)},
      {"temperature 0.7, top_p 0.9", cfg(0.7f, 0, 0.9f, 0.0f)},
      {"temperature 1, top_k 50", cfg(1.0f, 50, 1.0f, 0.0f)},
      {"temperature 1, min_p 0.05", cfg(1.0f, 0, 1.0f, 0.05f)},
  };
  const std::vector<float> peaked = Row(n, 3.0f, 10.0f, 1), flat = Row(n, 1.5f, 0.0f, 2);
  printf("sampler_bench: vocab %d, %d rows per cell, us per row (one thread)\n", n, rows);
  printf("%-30s %10s %10s\n", "configuration", "peaked", "flat");
  for (const Config& c : configs) {
    if (std::string(c.name).find(absl::GetFlag(FLAGS_only)) == std::string::npos) continue;
    double us[2];
    for (int which = 0; which < 2; ++which) {
      const std::vector<float>& row = which == 0 ? peaked : flat;
      rill::worker::Sampler sampler(c.c);
      int64_t checksum = 0;
      for (int i = 0; i < 20; ++i) checksum += sampler.Sample(row.data(), n).token;  // warm-up
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < rows; ++i) checksum += sampler.Sample(row.data(), n).token;
      us[which] =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          rows;
      if (checksum < 0) printf("unreachable\n");
    }
    printf("%-30s %10.1f %10.1f\n", c.name, us[0], us[1]);
  }
  return 0;
}
