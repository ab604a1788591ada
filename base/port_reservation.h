// Holds a TCP port for one server's own listeners (`rill serve`'s frontends),
// so that no other server can start on it.
//
// The frontends of one `rill serve` share their client port with
// SO_REUSEPORT. Linux lets any socket of the same user that also sets
// SO_REUSEPORT join such a port, and gRPC servers set it by default, so two
// `rill serve` on one port would both listen and split the connections. The
// reservation first binds the port *without* SO_REUSEPORT (which fails with
// EADDRINUSE when anyone holds it), then keeps a bound, never listening
// SO_REUSEPORT socket on it for as long as it lives: the server's own
// frontends (SO_REUSEPORT, same user) can still bind, while another
// `rill serve`'s check fails. What it cannot stop is a process of the same
// user that binds with SO_REUSEPORT without checking first; run servers
// under their own user where that matters. Thread: not thread-safe.
#ifndef RILL_BASE_PORT_RESERVATION_H_
#define RILL_BASE_PORT_RESERVATION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::base {

class PortReservation {
 public:
  PortReservation() = default;
  PortReservation(PortReservation&& other) noexcept;
  PortReservation& operator=(PortReservation&& other) noexcept;
  PortReservation(const PortReservation&) = delete;
  PortReservation& operator=(const PortReservation&) = delete;
  ~PortReservation();  // Releases the port.

  // Reserves `port` (0: a free one the kernel picks) on every address `host`
  // resolves to. FailedPrecondition "... already in use" when any process
  // holds it; InvalidArgument for a host that does not resolve.
  static absl::StatusOr<PortReservation> Reserve(const std::string& host, int port);

  int port() const { return port_; }
  void Release();

 private:
  std::vector<int> fds_;
  int port_ = 0;
};

}  // namespace rill::base

#endif  // RILL_BASE_PORT_RESERVATION_H_
