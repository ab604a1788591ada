// A persistent fork-join pool for the CPU kernels.
#ifndef RILL_KERNELS_CPU_THREAD_POOL_H_
#define RILL_KERNELS_CPU_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rill::kernels::cpu {

class ThreadPool {
 public:
  // num_threads counts the calling thread: ThreadPool(1) runs everything
  // inline. num_threads <= 0 means DefaultThreadCount().
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n), on the pool's
  // threads and the caller, and returns when all are done. Calls made from
  // inside fn (nested) run serially on the calling thread. Concurrent
  // top-level calls from different threads are serialized.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn);
  // As above, with ranges of at least min_chunk items (except the last).
  void ParallelFor(int64_t n, int64_t min_chunk,
                   const std::function<void(int64_t, int64_t)>& fn);

  // As above, with ranges of exactly `chunk` items (the last may be
  // shorter), handed out one at a time: for kernels whose items are already
  // coarse (MatMul's 16-row pieces), where a thread left idle at the end of
  // a ~100 us call costs more than one atomic add per item.
  void ParallelForChunks(int64_t n, int64_t chunk,
                         const std::function<void(int64_t, int64_t)>& fn);

  // CPUs this process may run on (sched_getaffinity), at least 1.
  static int DefaultThreadCount();

 private:
  struct Job;
  void WorkerLoop();
  void Run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn);

  const int num_threads_;
  std::vector<std::thread> workers_;

  std::mutex call_mu_;  // one top-level ParallelFor at a time

  std::mutex mu_;  // guards job_, stop_; generation_ is written under it
  std::condition_variable wake_cv_;
  std::condition_variable done_cv_;
  bool stop_ = false;
  Job* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
};

// Runs fn over [0, n) on pool, or inline when pool is null.
void ParallelFor(ThreadPool* pool, int64_t n, int64_t min_chunk,
                 const std::function<void(int64_t, int64_t)>& fn);
void ParallelForChunks(ThreadPool* pool, int64_t n, int64_t chunk,
                       const std::function<void(int64_t, int64_t)>& fn);

}  // namespace rill::kernels::cpu

#endif  // RILL_KERNELS_CPU_THREAD_POOL_H_
