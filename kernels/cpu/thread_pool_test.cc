#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace rill::kernels::cpu {
namespace {

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](int64_t b, int64_t e) {
        ASSERT_LE(0, b);
        ASSERT_LT(b, e);
        ASSERT_LE(e, n);
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
    }
  }
}

TEST(ThreadPool, MinChunkRespected) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.ParallelFor(100, 30, [&](int64_t b, int64_t e) {
    calls++;
    if (e != 100) {
      EXPECT_GE(e - b, 30);
    }
  });
  EXPECT_LE(calls.load(), 4);
}

TEST(ThreadPool, UsesWorkerThreads) {
  ThreadPool pool(2);
  std::atomic<int> other{0};
  const auto caller = std::this_thread::get_id();
  for (int rep = 0; rep < 200 && other.load() == 0; ++rep) {
    pool.ParallelFor(64, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() != caller) other++;
      volatile double x = 0;
      for (int i = 0; i < 20000; ++i) x = x + i;
    });
  }
  EXPECT_GT(other.load(), 0);
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  pool.ParallelFor(10, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const auto me = std::this_thread::get_id();
      pool.ParallelFor(5, [&](int64_t b2, int64_t e2) {
        EXPECT_EQ(std::this_thread::get_id(), me);
        sum += e2 - b2;
      });
    }
  });
  EXPECT_EQ(sum.load(), 50);
}

TEST(ThreadPool, ManyCallsAndConcurrentCallers) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  auto work = [&] {
    for (int rep = 0; rep < 2000; ++rep) {
      pool.ParallelFor(9, [&](int64_t b, int64_t e) { total += e - b; });
    }
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 2000 * 9);
}

TEST(ThreadPool, ParallelForChunksHandsOutExactChunks) {
  ThreadPool pool(2);
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.ParallelForChunks(10, 3, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> l(mu);
    ranges.emplace_back(b, e);
  });
  std::sort(ranges.begin(), ranges.end());
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, 3}, {3, 6}, {6, 9}, {9, 10}};
  EXPECT_EQ(ranges, want);
}

TEST(ThreadPool, DefaultThreadCountPositive) { EXPECT_GE(ThreadPool::DefaultThreadCount(), 1); }

}  // namespace
}  // namespace rill::kernels::cpu
