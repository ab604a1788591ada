// A server under test that streams over HTTP/1.1: one POST per request on a
// fresh connection, Server-Sent Events back. The wire work (connect, send,
// read events, HTTP errors, `{"error": ...}` events, a stream cut short) is
// here once; each API (llama-server's /completion, OpenAI's /v1/completions)
// says only what it sends and what an event means.
#ifndef RILL_BENCH_SERVE_BENCH_HTTP_SSE_BACKEND_H_
#define RILL_BENCH_SERVE_BENCH_HTTP_SSE_BACKEND_H_

#include <string>

#include "base/json.h"
#include "bench/serve_bench/backend.h"

namespace rill::bench {

class HttpSseBackend : public Backend {
 public:
  // address: "host:port" (IPv4 or a resolvable name); port 8080 if omitted.
  HttpSseBackend(BenchClock::time_point epoch, const std::string& address);
  void Send(const BenchRequest& request, RequestRecord* record) final;

 protected:
  // Request path, e.g. "/completion".
  virtual std::string Path() const = 0;
  virtual std::string Body(const BenchRequest& request) const = 0;
  // One event's JSON (already checked for an "error" member), received at
  // `arrival_s`: records its tokens (a server's own final count replaces the
  // sum of chunks); returns true when it is the last one.
  virtual bool OnEvent(const base::json::JsonValue& event, double arrival_s,
                       RequestRecord* record) = 0;
  // Appends a chunk of `tokens` output tokens that arrived at `arrival_s`.
  static void AddChunk(double arrival_s, int tokens, RequestRecord* record);

 private:
  std::string host_;
  std::string port_;
};

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_HTTP_SSE_BACKEND_H_
