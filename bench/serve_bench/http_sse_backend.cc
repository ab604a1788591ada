#include "bench/serve_bench/http_sse_backend.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/status/statusor.h"
#include "bench/serve_bench/http_sse_reader.h"

namespace rill::bench {
namespace {

// Connected TCP socket or -1 with `error` set.
int Connect(const std::string& host, const std::string& port, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    *error = absl::StrCat("resolve ", host, ": ", gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    *error = absl::StrCat("connect ", host, ":", port, ": ", std::strerror(errno));
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

bool WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

HttpSseBackend::HttpSseBackend(BenchClock::time_point epoch, const std::string& address)
    : Backend(epoch) {
  const size_t colon = address.rfind(':');
  host_ = colon == std::string::npos ? address : address.substr(0, colon);
  port_ = colon == std::string::npos ? "8080" : address.substr(colon + 1);
}

void HttpSseBackend::AddChunk(double arrival_s, int tokens, RequestRecord* record) {
  record->chunk_times_s.push_back(arrival_s);
  record->chunk_tokens.push_back(tokens);
  record->output_tokens += tokens;
}

void HttpSseBackend::Send(const BenchRequest& request, RequestRecord* record) {
  const std::string body = Body(request);
  const std::string http = absl::StrCat(
      "POST ", Path(), " HTTP/1.1\r\nHost: ", host_, ":", port_,
      "\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: ",
      body.size(), "\r\nConnection: close\r\n\r\n", body);
  record->start_s = Now();
  int fd = Connect(host_, port_, &record->error);
  if (fd < 0) {
    record->end_s = Now();
    return;
  }
  if (!WriteAll(fd, http)) {
    record->error = absl::StrCat("send failed: ", std::strerror(errno));
    close(fd);
    record->end_s = Now();
    return;
  }
  HttpSseReader reader;
  std::vector<std::string> events;
  std::vector<char> buf(1 << 16);
  bool stopped = false;
  while (!stopped) {
    ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const double t = Now();
    events.clear();
    absl::Status st = reader.Feed(std::string_view(buf.data(), static_cast<size_t>(n)), &events);
    if (!st.ok()) {
      record->error = std::string(st.message());
      break;
    }
    for (const std::string& data : events) {
      // OpenAI streams end with a non-JSON "[DONE]" event.
      if (data == "[DONE]") {
        stopped = true;
        break;
      }
      absl::StatusOr<base::json::JsonValue> ev = base::json::ParseJson(data);
      if (!ev.ok()) {
        record->error = absl::StrCat("bad event JSON: ", ev.status().message());
        break;
      }
      if (const base::json::JsonValue* err = ev->Find("error")) {
        const base::json::JsonValue* msg = err->Find("message");
        record->error = msg ? msg->string_value() : std::string("server error");
        break;
      }
      if (OnEvent(*ev, t, record)) {
        stopped = true;
        break;
      }
    }
    if (!record->error.empty()) break;
  }
  close(fd);
  record->end_s = Now();
  if (record->error.empty()) {
    if (reader.status_code() != 0 && (reader.status_code() < 200 || reader.status_code() >= 300)) {
      record->error = absl::StrCat("HTTP ", reader.status_code(), ": ", reader.error_body());
    } else if (!stopped) {
      record->error = "connection closed before the final event";
    }
  }
  if (record->prompt_tokens == 0) record->prompt_tokens = static_cast<int64_t>(request.token_ids.size());
  record->ok = record->error.empty();
}

}  // namespace rill::bench
