// llama.cpp's llama-server through its HTTP streaming API (POST /completion
// with "stream": true, Server-Sent Events back), one connection per request,
// greedy, exactly max_tokens output tokens (ignore_eos), prompt caching on.
#ifndef RILL_BENCH_SERVE_BENCH_LLAMA_SERVER_BACKEND_H_
#define RILL_BENCH_SERVE_BENCH_LLAMA_SERVER_BACKEND_H_

#include <string>

#include "bench/serve_bench/backend.h"

namespace rill::bench {

// The JSON body of one /completion request (exposed for tests).
std::string LlamaCompletionBody(const BenchRequest& request);

class LlamaServerBackend : public Backend {
 public:
  // address: "host:port" (IPv4 or a resolvable name).
  LlamaServerBackend(BenchClock::time_point epoch, const std::string& address);
  std::string name() const override { return "llama-server"; }
  void Send(const BenchRequest& request, RequestRecord* record) override;

 private:
  std::string host_;
  std::string port_;
};

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_LLAMA_SERVER_BACKEND_H_
