// llama.cpp's llama-server through its HTTP streaming API (POST /completion
// with "stream": true, Server-Sent Events back), one connection per request,
// greedy, exactly max_tokens output tokens (ignore_eos), prompt caching on.
#ifndef RILL_BENCH_SERVE_BENCH_LLAMA_SERVER_BACKEND_H_
#define RILL_BENCH_SERVE_BENCH_LLAMA_SERVER_BACKEND_H_

#include <string>

#include "bench/serve_bench/http_sse_backend.h"

namespace rill::bench {

// The JSON body of one /completion request (exposed for tests).
std::string LlamaCompletionBody(const BenchRequest& request);

class LlamaServerBackend : public HttpSseBackend {
 public:
  using HttpSseBackend::HttpSseBackend;
  std::string name() const override { return "llama-server"; }

 private:
  std::string Path() const override { return "/completion"; }
  std::string Body(const BenchRequest& request) const override {
    return LlamaCompletionBody(request);
  }
  bool OnEvent(const base::json::JsonValue& event, double arrival_s,
               RequestRecord* record) override;
};

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_LLAMA_SERVER_BACKEND_H_
