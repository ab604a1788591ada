// Rill's public gRPC API: one Generate stream per request, greedy, exactly
// max_tokens output tokens (ignore_eos), DELTA mode.
#ifndef RILL_BENCH_SERVE_BENCH_RILL_BACKEND_H_
#define RILL_BENCH_SERVE_BENCH_RILL_BACKEND_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "bench/serve_bench/backend.h"
#include "rill/v1/inference.grpc.pb.h"

namespace rill::bench {

class RillBackend : public Backend {
 public:
  // `connections` separate TCP connections, used round-robin (so requests
  // spread over frontends that share one port).
  RillBackend(BenchClock::time_point epoch, const std::string& address, int connections);
  std::string name() const override { return "rill"; }
  void Send(const BenchRequest& request, RequestRecord* record) override;

 private:
  std::vector<std::unique_ptr<v1::Inference::Stub>> stubs_;
  std::atomic<uint64_t> next_{0};
};

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_RILL_BACKEND_H_
