#include "worker/ipc/frame.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace rill::worker {
namespace {

constexpr uint32_t kMagic = 0x46524c52;  // "RLRF"

struct Prefix {
  uint32_t magic;
  uint32_t header_bytes;
  uint64_t payload_bytes;
};

absl::Status SendAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("control socket write failed: ",
                                                 std::strerror(errno)));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status RecvAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r == 0) return absl::UnavailableError("control socket closed by the peer");
    if (r < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("control socket read failed: ",
                                                 std::strerror(errno)));
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFrame(int fd, const std::string& header, const void* payload,
                        size_t payload_bytes) {
  const Prefix prefix{kMagic, static_cast<uint32_t>(header.size()), payload_bytes};
  // Small frames in one write: one syscall per rank per step.
  if (payload_bytes == 0 && header.size() < 64 * 1024) {
    std::string buf(sizeof(prefix) + header.size(), '\0');
    std::memcpy(buf.data(), &prefix, sizeof(prefix));
    std::memcpy(buf.data() + sizeof(prefix), header.data(), header.size());
    return SendAll(fd, buf.data(), buf.size());
  }
  if (absl::Status s = SendAll(fd, &prefix, sizeof(prefix)); !s.ok()) return s;
  if (absl::Status s = SendAll(fd, header.data(), header.size()); !s.ok()) return s;
  return payload_bytes ? SendAll(fd, payload, payload_bytes) : absl::OkStatus();
}

absl::Status ReadFrame(int fd, std::string* header, std::vector<char>* payload) {
  Prefix prefix;
  if (absl::Status s = RecvAll(fd, &prefix, sizeof(prefix)); !s.ok()) return s;
  if (prefix.magic != kMagic) return absl::DataLossError("control frame has a bad magic");
  if (prefix.header_bytes > kMaxFrameHeaderBytes ||
      prefix.payload_bytes > kMaxFramePayloadBytes) {
    return absl::DataLossError(absl::StrCat("control frame too large (", prefix.header_bytes,
                                            " + ", prefix.payload_bytes, " bytes)"));
  }
  header->resize(prefix.header_bytes);
  if (absl::Status s = RecvAll(fd, header->data(), header->size()); !s.ok()) return s;
  if (prefix.payload_bytes > 0 && payload == nullptr) {
    return absl::DataLossError("control frame has an unexpected payload");
  }
  if (payload != nullptr) {
    payload->resize(prefix.payload_bytes);
    if (absl::Status s = RecvAll(fd, payload->data(), payload->size()); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace rill::worker
