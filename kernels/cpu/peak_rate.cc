#include "kernels/cpu/peak_rate.h"

#include <immintrin.h>

#include <chrono>
#include <mutex>
#include <vector>

#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/cpu_features.h"

namespace rill::kernels::cpu {
namespace {

constexpr int kChains = 12;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs body(thread_index) once on every pool thread at the same time.
template <typename Body>
double RunOnEveryThread(ThreadPool* pool, Body body) {
  const int threads = pool ? pool->num_threads() : 1;
  const double start = Now();
  ParallelFor(pool, threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) body(t);
  });
  return Now() - start;
}

// The chains are spelled out (not an array) so they stay in registers at -O2.
#define RILL_TWELVE(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

__attribute__((target("avx2,fma"))) double FmaChains(int64_t iterations) {
#define RILL_INIT(c) __m256 a##c = _mm256_set1_ps(static_cast<float>(c + 2));
  RILL_TWELVE(RILL_INIT)
#undef RILL_INIT
  const __m256 half = _mm256_set1_ps(0.5f);
  for (int64_t i = 0; i < iterations; ++i) {
#define RILL_STEP(c) a##c = _mm256_fmadd_ps(a##c, half, half);
    RILL_TWELVE(RILL_STEP)
#undef RILL_STEP
  }
  double sum = 0;
  alignas(32) float v[8];
#define RILL_SUM(c)               \
  _mm256_store_ps(v, a##c);       \
  for (float x : v) sum += x;
  RILL_TWELVE(RILL_SUM)
#undef RILL_SUM
  return sum;
}

// The same chains 16 wide: where the matmul kernels run AVX-512, the peak
// they can approach is the zmm one (twice the ymm peak on CPUs with two
// 512-bit FMA pipes, equal where zmm ops are split in two halves).
RILL_TARGET_AVX512 double FmaChains512(int64_t iterations) {
#define RILL_INIT(c) __m512 a##c = _mm512_set1_ps(static_cast<float>(c + 2));
  RILL_TWELVE(RILL_INIT)
#undef RILL_INIT
  const __m512 half = _mm512_set1_ps(0.5f);
  for (int64_t i = 0; i < iterations; ++i) {
#define RILL_STEP(c) a##c = _mm512_fmadd_ps(a##c, half, half);
    RILL_TWELVE(RILL_STEP)
#undef RILL_STEP
  }
  double sum = 0;
  alignas(64) float v[16];
#define RILL_SUM(c)               \
  _mm512_store_ps(v, a##c);       \
  for (float x : v) sum += x;
  RILL_TWELVE(RILL_SUM)
#undef RILL_SUM
  return sum;
}

bool HasVnni() {
  return UseAvx512() && __builtin_cpu_supports("avx512vnni");
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) double VnniChains(int64_t iterations) {
// Distinct starts, or the compiler merges the identical chains into one.
#define RILL_INIT(c) __m512i a##c = _mm512_set1_epi32(c);
  RILL_TWELVE(RILL_INIT)
#undef RILL_INIT
  // Loaded through a volatile so the compiler cannot fold the products.
  volatile int16_t one = 1;
  const __m512i ones = _mm512_set1_epi16(one);
  for (int64_t i = 0; i < iterations; ++i) {
#define RILL_STEP(c) a##c = _mm512_dpwssd_epi32(a##c, ones, ones);
    RILL_TWELVE(RILL_STEP)
#undef RILL_STEP
  }
  double sum = 0;
  alignas(64) int32_t v[16];
#define RILL_SUM(c)               \
  _mm512_store_si512(v, a##c);    \
  for (int32_t x : v) sum += x;
  RILL_TWELVE(RILL_SUM)
#undef RILL_SUM
  return sum;
}

__attribute__((target("avx2"))) double SumFloats(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float v[8];
  _mm256_store_ps(v, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  double sum = 0;
  for (float x : v) sum += x;
  for (; i < n; ++i) sum += p[i];
  return sum;
}

}  // namespace

PeakRate MeasureF32FmaPeak(ThreadPool* pool, int64_t iterations) {
  PeakRate r;
  if (!UseAvx2()) return r;
  const int threads = pool ? pool->num_threads() : 1;
  std::vector<double> sums(threads);
  const bool wide = UseAvx512();
  r.seconds = RunOnEveryThread(pool, [&](int64_t t) {
    sums[t] = wide ? FmaChains512(iterations) : FmaChains(iterations);
  });
  r.lanes = wide ? 16 : 8;
  r.ops = 2.0 * r.lanes * kChains * static_cast<double>(iterations) * threads;
  for (double s : sums) r.checksum += s;
  return r;
}

PeakRate MeasureInt16VnniPeak(ThreadPool* pool, int64_t iterations) {
  PeakRate r;
  if (!HasVnni()) return r;
  const int threads = pool ? pool->num_threads() : 1;
  std::vector<double> sums(threads);
  r.seconds = RunOnEveryThread(pool, [&](int64_t t) { sums[t] = VnniChains(iterations); });
  r.ops = 2.0 * 32 * kChains * static_cast<double>(iterations) * threads;
  for (double s : sums) r.checksum += s;
  return r;
}

PeakRate MeasureReadBandwidth(ThreadPool* pool, int64_t bytes, int passes) {
  PeakRate r;
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  AlignedFloats buf(n);
  float* data = buf.data();
  for (int64_t i = 0; i < n; ++i) data[i] = 1.0f;
  std::mutex mu;
  const double start = Now();
  for (int p = 0; p < passes; ++p) {
    ParallelFor(pool, n, 1 << 16, [&](int64_t b, int64_t e) {
      const double s = UseAvx2() ? SumFloats(data + b, e - b) : [&] {
        double t = 0;
        for (int64_t i = b; i < e; ++i) t += data[i];
        return t;
      }();
      std::lock_guard<std::mutex> lock(mu);
      r.checksum += s;
    });
  }
  r.seconds = Now() - start;
  r.ops = static_cast<double>(n) * sizeof(float) * passes;
  return r;
}

}  // namespace rill::kernels::cpu
