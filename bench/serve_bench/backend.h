// A server under test. Send runs one request to completion (streaming) and
// fills its record; it is called from many client threads at once.
#ifndef RILL_BENCH_SERVE_BENCH_BACKEND_H_
#define RILL_BENCH_SERVE_BENCH_BACKEND_H_

#include <chrono>
#include <string>

#include "bench/serve_bench/request_record.h"
#include "bench/serve_bench/workload.h"

namespace rill::bench {

using BenchClock = std::chrono::steady_clock;

class Backend {
 public:
  explicit Backend(BenchClock::time_point epoch) : epoch_(epoch) {}
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Thread-safe. Sets record->start_s itself just before sending, so the
  // record's times are the client's view of the request.
  virtual void Send(const BenchRequest& request, RequestRecord* record) = 0;

 protected:
  double Now() const {
    return std::chrono::duration<double>(BenchClock::now() - epoch_).count();
  }

 private:
  BenchClock::time_point epoch_;
};

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_BACKEND_H_
