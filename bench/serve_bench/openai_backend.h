// Any OpenAI-compatible server (smg in front of Rill, llama-server's
// /v1/completions, vLLM, ...): streamed POST /v1/completions, greedy, exactly
// max_tokens output tokens (ignore_eos, and min_tokens = max_tokens for
// servers that take vLLM's sampling extensions), usage requested on the
// last event. The same client as the other backends, so a run through a
// gateway and a run on the native API differ only by the server path.
#ifndef RILL_BENCH_SERVE_BENCH_OPENAI_BACKEND_H_
#define RILL_BENCH_SERVE_BENCH_OPENAI_BACKEND_H_

#include <string>
#include <utility>

#include "bench/serve_bench/http_sse_backend.h"

namespace rill::bench {

// The JSON body of one /v1/completions request (exposed for tests). A
// token-id prompt is sent as OpenAI's list of integers.
std::string OpenAiCompletionBody(const std::string& model, const BenchRequest& request);

class OpenAiBackend : public HttpSseBackend {
 public:
  // model: the request's "model" (the server's /v1/models id).
  OpenAiBackend(BenchClock::time_point epoch, const std::string& address, std::string model)
      : HttpSseBackend(epoch, address), model_(std::move(model)) {}
  std::string name() const override { return "openai"; }

 private:
  std::string Path() const override { return "/v1/completions"; }
  std::string Body(const BenchRequest& request) const override {
    return OpenAiCompletionBody(model_, request);
  }
  // A chunk with text counts one token (servers stream one per event);
  // the usage event's completion_tokens then replaces the count.
  bool OnEvent(const base::json::JsonValue& event, double arrival_s,
               RequestRecord* record) override;

  std::string model_;
};

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_OPENAI_BACKEND_H_
