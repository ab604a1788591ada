#include "base/port_reservation.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rill::base {
namespace {

// "[::1]" -> "::1"; other hosts as given.
std::string Unbracket(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

int PortOf(int fd) {
  sockaddr_storage addr;
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
}

void SetPort(sockaddr* addr, int port) {
  if (addr->sa_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(addr)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(addr)->sin6_port = htons(port);
  }
}

// A socket bound to `addr` (dual-stack for IPv6), with or without
// SO_REUSEADDR / SO_REUSEPORT. -1 and errno on failure.
int BindSocket(const addrinfo& ai, bool reuse_addr, bool reuse_port) {
  const int fd = socket(ai.ai_family, ai.ai_socktype | SOCK_CLOEXEC, ai.ai_protocol);
  if (fd < 0) return -1;
  const int one = 1;
  const int zero = 0;
  if (reuse_addr) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (reuse_port) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  if (ai.ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  if (bind(fd, ai.ai_addr, ai.ai_addrlen) != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

}  // namespace

PortReservation::PortReservation(PortReservation&& other) noexcept
    : fds_(std::exchange(other.fds_, {})), port_(other.port_) {}

PortReservation& PortReservation::operator=(PortReservation&& other) noexcept {
  if (this != &other) {
    Release();
    fds_ = std::exchange(other.fds_, {});
    port_ = other.port_;
  }
  return *this;
}

PortReservation::~PortReservation() { Release(); }

void PortReservation::Release() {
  for (int fd : fds_) close(fd);
  fds_.clear();
}

absl::StatusOr<PortReservation> PortReservation::Reserve(const std::string& host, int port) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", port, " is out of range"));
  }
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* list = nullptr;
  const std::string name = Unbracket(host);
  if (const int rc = getaddrinfo(name.empty() ? nullptr : name.c_str(), "0", &hints, &list);
      rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve host '", host, "': ", gai_strerror(rc)));
  }
  PortReservation reservation;
  reservation.port_ = port;
  absl::Status status;
  for (addrinfo* ai = list; ai != nullptr && status.ok(); ai = ai->ai_next) {
    SetPort(ai->ai_addr, reservation.port_);
    // The check, bound as a gRPC server without SO_REUSEPORT binds: fails if
    // a socket listens on the port (SO_REUSEPORT or not) or another
    // reservation holds it, but not for connections left in TIME_WAIT.
    const int probe = BindSocket(*ai, /*reuse_addr=*/true, /*reuse_port=*/false);
    if (probe < 0) {
      if (errno == EADDRNOTAVAIL || errno == EAFNOSUPPORT) continue;  // e.g. ::1 without IPv6
      status = errno == EADDRINUSE
                   ? absl::FailedPreconditionError(absl::StrCat(
                         "port ", reservation.port_, " on ", host,
                         " is already in use (another rill serve or server?); stop it or pick "
                         "another --port"))
                   : absl::UnavailableError(absl::StrCat("cannot bind ", host, ":",
                                                         reservation.port_, ": ",
                                                         std::strerror(errno)));
      break;
    }
    if (reservation.port_ == 0) reservation.port_ = PortOf(probe);
    SetPort(ai->ai_addr, reservation.port_);
    close(probe);
    // The hold: bound, never listening, so it takes no connections. Without
    // SO_REUSEADDR, so the check above fails against it; SO_REUSEPORT lets
    // the server's own listeners (same user) bind beside it. The second try
    // is for a port whose TIME_WAIT connections came from sockets without
    // SO_REUSEPORT: then only listening servers are kept out.
    int hold = BindSocket(*ai, /*reuse_addr=*/false, /*reuse_port=*/true);
    if (hold < 0 && errno == EADDRINUSE) {
      hold = BindSocket(*ai, /*reuse_addr=*/true, /*reuse_port=*/true);
    }
    if (hold < 0) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "port ", reservation.port_, " on ", host, " was taken while reserving it: ",
          std::strerror(errno)));
      break;
    }
    reservation.fds_.push_back(hold);
  }
  freeaddrinfo(list);
  if (!status.ok()) return status;
  if (reservation.fds_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no address of '", host, "' can be bound"));
  }
  return reservation;
}

}  // namespace rill::base
