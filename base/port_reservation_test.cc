#include "base/port_reservation.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "absl/status/status.h"

namespace rill::base {
namespace {

// A listening 127.0.0.1 socket on `port`, as a gRPC server binds it; -1 if
// the bind fails.
int Listen(int port, bool reuse_port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (reuse_port) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 8) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(PortReservationTest, OwnReusePortListenersJoinButASecondReservationFails) {
  absl::StatusOr<PortReservation> first = PortReservation::Reserve("127.0.0.1", 0);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_GT(first->port(), 0);
  // The server's own frontends (SO_REUSEPORT) bind next to the hold.
  const int frontend = Listen(first->port(), /*reuse_port=*/true);
  ASSERT_GE(frontend, 0);
  // Another server checking the port is refused, naming it.
  absl::StatusOr<PortReservation> second = PortReservation::Reserve("127.0.0.1", first->port());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("already in use"), std::string::npos);
  close(frontend);
  // Still refused with only the (non-listening) hold left.
  EXPECT_FALSE(PortReservation::Reserve("127.0.0.1", first->port()).ok());
  const int port = first->port();
  first->Release();
  absl::StatusOr<PortReservation> again = PortReservation::Reserve("127.0.0.1", port);
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST(PortReservationTest, APortHeldWithoutReusePortIsInUse) {
  const int other = Listen(0, /*reuse_port=*/false);
  ASSERT_GE(other, 0);
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(other, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  absl::StatusOr<PortReservation> r = PortReservation::Reserve("127.0.0.1", ntohs(addr.sin_port));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  close(other);
}

TEST(PortReservationTest, UnresolvableHostIsInvalidArgument) {
  absl::StatusOr<PortReservation> r = PortReservation::Reserve("no such host.invalid", 0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
}

}  // namespace
}  // namespace rill::base
