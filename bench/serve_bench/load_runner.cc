#include "bench/serve_bench/load_runner.h"

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "absl/status/status.h"

namespace rill::bench {
namespace {

// Runs `count` sends over `workers` threads; worker i takes the next index
// and, with arrivals, waits for that index's arrival time first.
void RunPool(int workers, int count, const std::function<bool(int)>& send_one) {
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  threads.reserve(workers);
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      while (true) {
        const int i = next.fetch_add(1);
        if (i >= count || !send_one(i)) return;
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace

std::vector<double> PoissonArrivals(int n, double rate, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::vector<double> out(n);
  double t = 0;
  for (double& a : out) {
    a = t;
    t += gap(rng);
  }
  return out;
}

absl::StatusOr<std::vector<RequestRecord>> RunLoad(Backend* backend,
                                                   const std::vector<BenchRequest>& requests,
                                                   const LoadOptions& o,
                                                   const ProgressFn& progress) {
  if (requests.empty()) return absl::InvalidArgumentError("no requests to send");
  if (o.concurrency < 1) return absl::InvalidArgumentError("concurrency must be >= 1");
  if (o.request_rate < 0) return absl::InvalidArgumentError("request_rate must be >= 0");
  if (o.warmup_requests < 0 || o.duration_s < 0) {
    return absl::InvalidArgumentError("warmup_requests and duration_s must be >= 0");
  }

  // Warm-up: the same kind of requests, same concurrency, not recorded.
  if (o.warmup_requests > 0) {
    RunPool(o.concurrency, o.warmup_requests, [&](int i) {
      RequestRecord ignored;
      const std::vector<BenchRequest>& pool = o.warmup_pool.empty() ? requests : o.warmup_pool;
      backend->Send(pool[i % pool.size()], &ignored);
      return true;
    });
  }

  const int n = static_cast<int>(requests.size());
  std::vector<RequestRecord> records(n);
  std::vector<char> sent(n, 0);
  const std::vector<double> arrivals =
      o.request_rate > 0 ? PoissonArrivals(n, o.request_rate, o.seed) : std::vector<double>();
  const auto start = BenchClock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(BenchClock::now() - start).count(); };
  RunPool(std::min(o.concurrency, n), n, [&](int i) {
    if (!arrivals.empty()) {
      const double wait = arrivals[i] - elapsed();
      if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
    if (o.duration_s > 0 && elapsed() >= o.duration_s) return false;
    backend->Send(requests[i], &records[i]);
    sent[i] = 1;
    if (progress) progress(records[i]);
    return true;
  });
  std::vector<RequestRecord> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    if (sent[i]) out.push_back(std::move(records[i]));
  }
  return out;
}

}  // namespace rill::bench
