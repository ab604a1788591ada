#include "worker/ipc/frame.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

namespace rill::worker {
namespace {

struct SocketPair {
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
  ~SocketPair() {
    for (int f : fd) {
      if (f >= 0) close(f);
    }
  }
  int fd[2] = {-1, -1};
};

TEST(FrameTest, RoundTripsHeaderAndLargePayload) {
  SocketPair sp;
  std::vector<char> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31);
  std::thread writer([&] {
    ASSERT_TRUE(WriteFrame(sp.fd[0], "small").ok());
    ASSERT_TRUE(WriteFrame(sp.fd[0], std::string(100000, 'h'), big.data(), big.size()).ok());
  });
  std::string header;
  std::vector<char> payload;
  ASSERT_TRUE(ReadFrame(sp.fd[1], &header, &payload).ok());
  EXPECT_EQ(header, "small");
  EXPECT_TRUE(payload.empty());
  ASSERT_TRUE(ReadFrame(sp.fd[1], &header, &payload).ok());
  EXPECT_EQ(header, std::string(100000, 'h'));
  EXPECT_EQ(payload, big);
  writer.join();
}

TEST(FrameTest, PeerGoneIsUnavailable) {
  SocketPair sp;
  close(sp.fd[0]);
  sp.fd[0] = -1;
  std::string header;
  absl::Status s = ReadFrame(sp.fd[1], &header, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(WriteFrame(sp.fd[1], "x").code(), absl::StatusCode::kUnavailable);  // no SIGPIPE
}

TEST(FrameTest, CorruptPrefixIsDataLossNotAHugeAllocation) {
  SocketPair sp;
  const uint32_t bad[4] = {0x46524c52, 0xffffffffu, 0, 0};
  ASSERT_EQ(write(sp.fd[0], bad, sizeof(bad)), static_cast<ssize_t>(sizeof(bad)));
  std::string header;
  EXPECT_EQ(ReadFrame(sp.fd[1], &header, nullptr).code(), absl::StatusCode::kDataLoss);
  const uint32_t magic[4] = {0x12345678, 1, 0, 0};
  ASSERT_EQ(write(sp.fd[0], magic, sizeof(magic)), static_cast<ssize_t>(sizeof(magic)));
  EXPECT_EQ(ReadFrame(sp.fd[1], &header, nullptr).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace rill::worker
