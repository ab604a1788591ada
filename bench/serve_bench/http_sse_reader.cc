#include "bench/serve_bench/http_sse_reader.h"

#include <cctype>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rill::bench {

absl::Status HttpSseReader::Feed(std::string_view bytes, std::vector<std::string>* events) {
  if (!error_.ok()) return error_;
  if (state_ == State::kHeaders) {
    buffer_.append(bytes);
    if (buffer_.find("\r\n\r\n") == std::string::npos) {
      if (buffer_.size() > (1 << 16)) error_ = absl::DataLossError("HTTP headers over 64 KiB");
      return error_;
    }
    error_ = ParseHeaders();
    if (!error_.ok()) return error_;
  } else if (state_ == State::kIdentity) {
    FeedBody(bytes, events);
    return error_;
  } else {
    buffer_.append(bytes);
  }
  if (state_ == State::kIdentity) {
    std::string rest;
    rest.swap(buffer_);
    FeedBody(rest, events);
    return error_;
  }
  error_ = Dechunk(events);
  return error_;
}

absl::Status HttpSseReader::ParseHeaders() {
  const size_t end = buffer_.find("\r\n\r\n");
  std::string head = buffer_.substr(0, end);
  buffer_.erase(0, end + 4);
  std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
  // "HTTP/1.1 200 OK"
  std::vector<std::string> first = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  if (first.size() < 2 || !absl::StartsWith(first[0], "HTTP/") ||
      !absl::SimpleAtoi(first[1], &status_code_)) {
    return absl::DataLossError(absl::StrCat("bad HTTP status line: ", lines[0]));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string lower = absl::AsciiStrToLower(lines[i]);
    if (absl::StartsWith(lower, "transfer-encoding:") && absl::StrContains(lower, "chunked")) {
      chunked_ = true;
    }
  }
  state_ = chunked_ ? State::kChunkSize : State::kIdentity;
  return absl::OkStatus();
}

absl::Status HttpSseReader::Dechunk(std::vector<std::string>* events) {
  while (true) {
    switch (state_) {
      case State::kChunkSize: {
        const size_t eol = buffer_.find("\r\n");
        if (eol == std::string::npos) return absl::OkStatus();
        std::string size_text = buffer_.substr(0, buffer_.find_first_of(";\r"));
        buffer_.erase(0, eol + 2);
        char* endp = nullptr;
        const unsigned long long size = std::strtoull(size_text.c_str(), &endp, 16);
        if (size_text.empty() || endp == size_text.c_str()) {
          return absl::DataLossError(absl::StrCat("bad HTTP chunk size '", size_text, "'"));
        }
        chunk_left_ = static_cast<size_t>(size);
        state_ = chunk_left_ == 0 ? State::kDone : State::kChunkData;
        break;
      }
      case State::kChunkData: {
        if (buffer_.empty()) return absl::OkStatus();
        const size_t n = std::min(chunk_left_, buffer_.size());
        FeedBody(std::string_view(buffer_).substr(0, n), events);
        buffer_.erase(0, n);
        chunk_left_ -= n;
        if (chunk_left_ == 0) state_ = State::kChunkEnd;
        break;
      }
      case State::kChunkEnd:
        if (buffer_.size() < 2) return absl::OkStatus();
        if (buffer_.compare(0, 2, "\r\n") != 0) return absl::DataLossError("HTTP chunk not followed by CRLF");
        buffer_.erase(0, 2);
        state_ = State::kChunkSize;
        break;
      default:
        return absl::OkStatus();
    }
  }
}

void HttpSseReader::FeedBody(std::string_view body, std::vector<std::string>* events) {
  if (status_code_ < 200 || status_code_ >= 300) {
    if (error_body_.size() < 4096) error_body_.append(body.substr(0, 4096 - error_body_.size()));
    return;
  }
  sse_buffer_.append(body);
  size_t start = 0;
  while (true) {
    const size_t eol = sse_buffer_.find('\n', start);
    if (eol == std::string::npos) break;
    std::string_view line(sse_buffer_.data() + start, eol - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    start = eol + 1;
    if (line.empty()) {  // Blank line: dispatch the event.
      if (has_data_) events->push_back(event_data_);
      event_data_.clear();
      has_data_ = false;
    } else if (line.substr(0, 5) == "data:") {
      std::string_view value = line.substr(5);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (has_data_) event_data_.push_back('\n');
      event_data_.append(value);
      has_data_ = true;
    }  // Comments and other fields (event:, id:, retry:) are not needed.
  }
  sse_buffer_.erase(0, start);
}

}  // namespace rill::bench
