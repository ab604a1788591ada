// MatMul throughput for the default model's shapes (SmolLM2-135M: Q4_1
// layers, Q8_0 tied embedding / output), or with --q4_k_m the types of its
// Q4_K_M conversion (Q5_0 for the 576-wide rows, Q4_K / Q6_K ffn down), or
// with --low_k Q2_K and Q3_K at 256-multiple shapes (Q2_K/Q3_K mixes).
//
//   bazel run //kernels/cpu/bench:matmul_bench -- [--threads=N] [--min_ms=M] [--q4_k_m|--low_k]
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_types.h"
#include "kernels/cpu/thread_pool.h"

namespace rill::kernels::cpu {
namespace {

struct Shape {
  int64_t cols, rows;  // in -> out features
  GgmlType type;
  const char* what;
};

// CPU time of the whole process (all pool threads): less sensitive than wall
// time to other load on a shared machine.
double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::vector<uint8_t> RandomMatrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::vector<uint8_t> data(RowBytes(type, cols) * rows);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const size_t bb = BlockBytes(type);
  // Normal f16 scales where the block keeps them (random bytes could be
  // subnormal, which some CPUs run slowly).
  const size_t d_off = type == GgmlType::kQ6_K   ? 208
                       : type == GgmlType::kQ3_K ? 108
                       : type == GgmlType::kQ2_K ? 80
                                                 : 0;
  const bool has_min = type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1 ||
                       type == GgmlType::kQ4_K || type == GgmlType::kQ5_K ||
                       type == GgmlType::kQ2_K;
  for (size_t off = 0; off + bb <= data.size(); off += bb) {
    const uint16_t d = F32ToF16(0.01f);
    std::memcpy(data.data() + off + d_off, &d, 2);
    if (has_min) std::memcpy(data.data() + off + d_off + 2, &d, 2);  // the min follows d
  }
  return data;
}

int Main(int argc, char** argv) {
  int threads = 0;
  double min_ms = 200;
  double stream_mb = 0;
  bool exact = false, interleaved = false, q4_k_m = false, low_k = false;
  std::vector<int64_t> tokens = {1, 8, 32, 512};
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) threads = std::atoi(argv[i] + 10);
    if (std::strncmp(argv[i], "--min_ms=", 9) == 0) min_ms = std::atof(argv[i] + 9);
    if (std::strcmp(argv[i], "--scalar") == 0) SetForceScalar(true);
    // The exact path (f32 activations), which the models use by default.
    if (std::strcmp(argv[i], "--exact") == 0) exact = true;
    if (std::strcmp(argv[i], "--no_avx512") == 0) SetDisableAvx512(true);
    // The exact path over 8-row interleaved weights (what models pack for
    // where the kernel plan says interleaved).
    if (std::strcmp(argv[i], "--interleaved") == 0) exact = interleaved = true;
    if (std::strcmp(argv[i], "--q4_k_m") == 0) q4_k_m = true;
    if (std::strcmp(argv[i], "--low_k") == 0) low_k = true;
    if (std::strncmp(argv[i], "--stream_mb=", 12) == 0) stream_mb = std::atof(argv[i] + 12);
    if (std::strncmp(argv[i], "--tokens=", 9) == 0) {
      tokens.clear();
      for (const char* p = argv[i] + 9; *p;) {
        char* end;
        tokens.push_back(std::strtol(p, &end, 10));
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p) break;
      }
    }
  }
  ThreadPool pool(threads);
  printf("threads=%d path=%s%s%s\n", pool.num_threads(),
         UseAvx512() ? "avx512" : UseAvx2() ? "avx2" : "scalar",
         interleaved ? (UseAvx2() ? " interleaved" : " (interleaved needs AVX2)") : "",
         stream_mb > 0 ? " weights streamed" : " weights in cache");
  const std::vector<Shape> default_shapes = {
      {576, 576, GgmlType::kQ4_1, "attn q/o"},
      {576, 192, GgmlType::kQ4_1, "attn k/v"},
      {576, 1536, GgmlType::kQ4_1, "ffn gate/up"},
      {1536, 576, GgmlType::kQ4_1, "ffn down"},
      {576, 49152, GgmlType::kQ8_0, "lm head"},
      {576, 576, GgmlType::kQ8_0, "q8_0 576"},
      {576, 1536, GgmlType::kQ8_0, "q8_0 ffn"},
  };
  const std::vector<Shape> q4_k_m_shapes = {
      {576, 576, GgmlType::kQ5_0, "attn q/o"},
      {576, 1536, GgmlType::kQ5_0, "ffn gate/up"},
      {1536, 576, GgmlType::kQ4_K, "ffn down"},
      {1536, 576, GgmlType::kQ6_K, "ffn down"},
      {576, 49152, GgmlType::kQ8_0, "lm head"},
  };
  const std::vector<Shape> low_k_shapes = {
      {1536, 576, GgmlType::kQ2_K, "ffn down"},
      {2048, 2048, GgmlType::kQ2_K, "2048 square"},
      {1536, 576, GgmlType::kQ3_K, "ffn down"},
  };
  const std::vector<Shape>& shapes =
      q4_k_m ? q4_k_m_shapes : low_k ? low_k_shapes : default_shapes;
  printf("%-12s %-5s %6s %6s %6s %10s %9s %9s %10s %10s\n", "what", "type", "in", "out", "tokens",
         "us/call", "GFLOP/s", "GB/s(w)", "us/token", "cpu us");
  std::mt19937 rng(1);
  for (const Shape& s : shapes) {
    std::vector<uint8_t> w = RandomMatrix(s.type, s.rows, s.cols, rng);
    const int copies =
        std::max<int>(1, static_cast<int>(stream_mb * (1 << 20) / double(w.size()) + 0.5));
    // Copies of the same bytes: the same work per call, other addresses.
    std::vector<std::vector<uint8_t>> data(copies, w);
    std::vector<WeightMatrix> ms;
    for (auto& d : data) {
      ms.push_back(MakeWeightMatrix(s.type, s.rows, s.cols, d.data()));
      ms.back().float_activations = exact;
      if (interleaved) PackForInterleavedKernels(&ms.back());
    }
    int next = 0;
    for (int64_t nt : tokens) {
      std::vector<float> x(nt * s.cols), y(nt * s.rows);
      std::normal_distribution<float> nd;
      for (float& v : x) v = nd(rng);
      for (const WeightMatrix& m : ms) MatMul(m, x.data(), nt, y.data(), &pool);  // warm up
      int iters = 0;
      const double c0 = CpuSeconds();
      const auto t0 = std::chrono::steady_clock::now();
      double el = 0;
      do {
        MatMul(ms[next], x.data(), nt, y.data(), &pool);
        next = (next + 1) % copies;
        ++iters;
        el = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                 .count();
      } while (el < min_ms * 1000);
      const double us = el / iters;
      const double cpu_us = (CpuSeconds() - c0) * 1e6 / iters;
      const double flops = 2.0 * s.rows * s.cols * nt;
      const double bytes = double(w.size());
      printf("%-12s %-5s %6ld %6ld %6ld %10.1f %9.2f %9.2f %10.2f %10.1f\n", s.what,
             std::string(GgmlTypeName(s.type)).c_str(), long(s.cols), long(s.rows), long(nt), us,
             flops / us / 1e3, bytes / us / 1e3, us / nt, cpu_us);
    }
  }
  return 0;
}

}  // namespace
}  // namespace rill::kernels::cpu

int main(int argc, char** argv) { return rill::kernels::cpu::Main(argc, argv); }
