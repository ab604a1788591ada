// Two and three ranks as threads of one process, each with its own gloo
// context over 127.0.0.1: sums and broadcasts arrive intact and identical on
// every rank, and a rank whose peer never shows up gets an error, not a hang.
#include "worker/comm/gloo_communicator.h"

#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/util/test_seed.h"

namespace rill::worker {
namespace {

std::string FreshDir() {
  static int counter = 0;
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/gloo", getpid(), "_", counter++);
  std::string cmd = "mkdir -p " + dir;
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

void RunRanks(int world, const std::function<void(Communicator*)>& body) {
  const std::string dir = FreshDir();
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      GlooOptions o;
      o.rank = r;
      o.world_size = world;
      o.rendezvous_dir = dir;
      absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm = GlooCommunicator::Create(o);
      ASSERT_TRUE(comm.ok()) << comm.status();
      EXPECT_EQ((*comm)->rank(), r);
      body(comm->get());
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(GlooCommunicatorTest, AllReduceSumsIdenticallyOnEveryRank) {
  for (int world : {2, 3}) {
    const int64_t n = 100003;  // Odd size: uneven ring chunks.
    std::vector<std::vector<float>> inputs(world, std::vector<float>(n));
    std::mt19937 rng(rill::tests::util::StreamSeed(world));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto& v : inputs) {
      for (float& x : v) x = dist(rng);
    }
    std::vector<std::vector<float>> results = inputs;
    RunRanks(world, [&](Communicator* comm) {
      // Several calls in a row, as the model makes two per layer.
      for (int rep = 0; rep < 3; ++rep) {
        std::vector<float> buf = inputs[comm->rank()];
        ASSERT_TRUE(comm->AllReduceSum(buf.data(), n).ok());
        if (rep == 2) results[comm->rank()] = buf;
      }
    });
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int r = 0; r < world; ++r) sum += inputs[r][i];
      ASSERT_NEAR(results[0][i], sum, 1e-5) << "element " << i;
      for (int r = 1; r < world; ++r) {
        ASSERT_EQ(results[r][i], results[0][i]) << "rank " << r << " element " << i;
      }
    }
  }
}

TEST(GlooCommunicatorTest, BroadcastCopiesTheRootsBytes) {
  std::vector<std::vector<uint8_t>> bufs(2, std::vector<uint8_t>(4097, 0));
  for (size_t i = 0; i < bufs[1].size(); ++i) bufs[1][i] = static_cast<uint8_t>(i * 7);
  RunRanks(2, [&](Communicator* comm) {
    ASSERT_TRUE(comm->Broadcast(bufs[comm->rank()].data(), bufs[0].size(), 1).ok());
  });
  EXPECT_EQ(bufs[0], bufs[1]);
}

TEST(GlooCommunicatorTest, MissingPeerIsAnErrorNotAHang) {
  GlooOptions o;
  o.rank = 0;
  o.world_size = 2;
  o.rendezvous_dir = FreshDir();
  o.timeout = std::chrono::milliseconds(1500);
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm = GlooCommunicator::Create(o);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(comm.status().message().find("rendezvous"), std::string::npos) << comm.status();
}

TEST(GlooCommunicatorTest, RejectsBadRank) {
  GlooOptions o;
  o.rank = 2;
  o.world_size = 2;
  o.rendezvous_dir = "/tmp";
  EXPECT_EQ(GlooCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rill::worker
