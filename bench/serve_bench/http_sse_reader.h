// Incremental reader of an HTTP/1.1 response whose body is a Server-Sent
// Events stream (llama-server's streaming API): feed it the bytes as they
// arrive, get back each event's `data:` payload. Handles chunked transfer
// encoding, identity bodies, and events split across reads.
#ifndef RILL_BENCH_SERVE_BENCH_HTTP_SSE_READER_H_
#define RILL_BENCH_SERVE_BENCH_HTTP_SSE_READER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace rill::bench {

class HttpSseReader {
 public:
  // Appends the data payloads of events completed by `bytes` to `events`.
  // An error (bad status line, non-2xx status, malformed chunking) is sticky.
  absl::Status Feed(std::string_view bytes, std::vector<std::string>* events);
  int status_code() const { return status_code_; }
  // The body so far when the status was not 2xx (for the error message).
  const std::string& error_body() const { return error_body_; }

 private:
  absl::Status ParseHeaders();
  absl::Status Dechunk(std::vector<std::string>* events);
  void FeedBody(std::string_view body, std::vector<std::string>* events);

  enum class State { kHeaders, kChunkSize, kChunkData, kChunkEnd, kIdentity, kDone };
  State state_ = State::kHeaders;
  std::string buffer_;      // Unparsed bytes (headers or chunk framing).
  std::string sse_buffer_;  // Body bytes not yet forming a whole line.
  std::string event_data_;  // `data:` lines of the event being read.
  bool has_data_ = false;
  size_t chunk_left_ = 0;
  int status_code_ = 0;
  bool chunked_ = false;
  std::string error_body_;
  absl::Status error_;
};

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_HTTP_SSE_READER_H_
