#include "kernels/cpu/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#include <glog/logging.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define RILL_CPU_RELAX() _mm_pause()
#else
#define RILL_CPU_RELAX() std::this_thread::yield()
#endif

namespace rill::kernels::cpu {
namespace {

// Set while a thread runs pool work, so nested ParallelFor runs inline.
thread_local bool tls_in_parallel = false;

// ~tens of microseconds: covers the gap between back-to-back kernels of a
// forward pass without burning a core while the server idles.
constexpr int kSpinIterations = 20000;

// Pool threads spin between kernels and so never leave the core by
// themselves; a yield lets the engine's and frontend's I/O threads run
// (service TTFT at 2 threads: +8.2 ms without yields, +2-5 ms with them).
// But under EEVDF a yield can also hand the core to a niced process for a
// whole slice, and a decode step has ~200 parallel regions: with niced
// builds running, one yield per region cut two-thread decode to less than
// half at batch 1 and by a fifth at batch 32 (bench/README.md, kern4). So
// each thread yields at most once per this interval, which still bounds how
// long a woken I/O thread waits behind the spinners (4 ms: no faster).
constexpr int64_t kYieldIntervalNs = 1'000'000;

// Yields if this thread has not yielded in the last kYieldIntervalNs.
void MaybeYield() {
  thread_local int64_t last_yield_ns = 0;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  if (now - last_yield_ns < kYieldIntervalNs) return;
  last_yield_ns = now;
  sched_yield();
}

struct InlineScope {
  bool saved = tls_in_parallel;
  InlineScope() { tls_in_parallel = true; }
  ~InlineScope() { tls_in_parallel = saved; }
};

}  // namespace

// One ParallelFor call; lives on the caller's stack. Workers only touch it
// between taking a ref (under mu_, while job_ points here) and dropping it.
struct ThreadPool::Job {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n;
  int64_t chunk;
  int64_t num_chunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::atomic<int> refs{0};

  // Returns true if this call finished the last chunk.
  bool RunChunks() {
    bool finished_last = false;
    for (;;) {
      const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= num_chunks) break;
      const int64_t begin = c * chunk;
      const int64_t end = std::min(n, begin + chunk);
      (*fn)(begin, end);
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == num_chunks) finished_last = true;
    }
    return finished_last;
  }
};

int ThreadPool::DefaultThreadCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads > 0 ? num_threads : DefaultThreadCount()) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::WorkerLoop() {
  tls_in_parallel = true;
  uint64_t seen = 0;
  for (;;) {
    for (int i = 0; i < kSpinIterations; ++i) {
      if (generation_.load(std::memory_order_acquire) != seen) break;
      RILL_CPU_RELAX();
    }
    Job* job;
    {
      std::unique_lock<std::mutex> l(mu_);
      wake_cv_.wait(l, [&] { return stop_ || generation_.load() != seen; });
      if (stop_) return;
      seen = generation_.load();
      job = job_;
      if (job == nullptr) continue;
      job->refs.fetch_add(1, std::memory_order_relaxed);
    }
    if (job->RunChunks()) {
      std::lock_guard<std::mutex> l(mu_);
      done_cv_.notify_all();
    }
    job->refs.fetch_sub(1, std::memory_order_release);
    MaybeYield();
  }
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  ParallelFor(n, 1, fn);
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  // A few chunks per thread so uneven progress (the caller also serves
  // requests, other processes share the cores) balances out.
  const int64_t target_chunks = static_cast<int64_t>(num_threads_) * 4;
  Run(n, std::max(min_chunk, (n + target_chunks - 1) / target_chunks), fn);
}

void ThreadPool::ParallelForChunks(int64_t n, int64_t chunk,
                                   const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  Run(n, std::max<int64_t>(1, chunk), fn);
}

void ThreadPool::Run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (tls_in_parallel || num_threads_ == 1 || n <= chunk) {
    InlineScope scope;
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  MaybeYield();
  Job job;
  job.fn = &fn;
  job.n = n;
  job.chunk = chunk;
  job.num_chunks = (n + job.chunk - 1) / job.chunk;
  {
    std::lock_guard<std::mutex> l(mu_);
    job_ = &job;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_cv_.notify_all();
  {
    InlineScope scope;
    job.RunChunks();
  }
  for (int i = 0; i < kSpinIterations; ++i) {
    if (job.done.load(std::memory_order_acquire) == job.num_chunks) break;
    RILL_CPU_RELAX();
  }
  {
    std::unique_lock<std::mutex> l(mu_);
    done_cv_.wait(l, [&] { return job.done.load(std::memory_order_acquire) == job.num_chunks; });
    job_ = nullptr;  // no new refs after this
  }
  while (job.refs.load(std::memory_order_acquire) != 0) RILL_CPU_RELAX();
}

void ParallelFor(ThreadPool* pool, int64_t n, int64_t min_chunk,
                 const std::function<void(int64_t, int64_t)>& fn) {
  if (pool != nullptr) {
    pool->ParallelFor(n, min_chunk, fn);
  } else if (n > 0) {
    fn(0, n);
  }
}

void ParallelForChunks(ThreadPool* pool, int64_t n, int64_t chunk,
                       const std::function<void(int64_t, int64_t)>& fn) {
  if (pool != nullptr) {
    pool->ParallelForChunks(n, chunk, fn);
  } else if (n > 0) {
    fn(0, n);
  }
}

}  // namespace rill::kernels::cpu
