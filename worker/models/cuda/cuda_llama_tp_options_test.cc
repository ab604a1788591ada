// CudaLlama's refusals of bad tensor-parallel options. They come before any
// CUDA call, so they are tested on any machine (GPU or not).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "worker/comm/device_communicator.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/cuda/cuda_llama.h"
#include "worker/models/cuda/tiny_llama_gguf.h"

namespace rill::worker {
namespace {

// A communicator that only answers who it is (nothing here reaches a sum).
class FakeComm : public DeviceCommunicator {
 public:
  FakeComm(int rank, int world) : rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  const char* backend() const override { return "fake"; }
  absl::Status AllReduceSumBf16(void*, int64_t, ::rill::kernels::cuda::Stream) override {
    return absl::InternalError("FakeComm cannot sum");
  }

 private:
  int rank_, world_;
};

class CudaLlamaTpOptionsTest : public testing::Test {
 protected:
  void SetUp() override {
    // 2 query heads over 1 K/V head: at most one rank.
    const std::string path = tiny_gguf::TmpPath("tp_options.gguf");
    ASSERT_TRUE(tiny_gguf::TinyLlamaGguf(1, false).WriteFile(path).ok());
    absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ck =
        worker::loader::LoadCheckpoint(path);
    ASSERT_TRUE(ck.ok()) << ck.status();
    ckpt_ = std::move(*ck);
  }

  absl::Status Create(int rank, int world, DeviceCommunicator* comm) {
    CudaLlamaOptions o;
    o.num_kv_blocks = 4;
    o.tp_rank = rank;
    o.tp_world_size = world;
    o.comm = comm;
    return CudaLlama::Create(ckpt_, o).status();
  }

  static void ExpectInvalid(const absl::Status& s, const std::string& says) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(says), std::string::npos) << s;
  }

  std::shared_ptr<const worker::loader::Checkpoint> ckpt_;
};

TEST_F(CudaLlamaTpOptionsTest, RankOutsideTheWorld) {
  ExpectInvalid(Create(2, 2, nullptr), "rank 2 outside a world of 2");
  ExpectInvalid(Create(-1, 2, nullptr), "outside a world");
  ExpectInvalid(Create(0, 0, nullptr), "outside a world of 0");
}

TEST_F(CudaLlamaTpOptionsTest, SeveralRanksNeedACommunicator) {
  ExpectInvalid(Create(0, 2, nullptr), "needs a device communicator");
}

TEST_F(CudaLlamaTpOptionsTest, CommunicatorMustAgreeWithTheOptions) {
  FakeComm rank1(1, 2), world3(0, 3), world2(0, 2);
  ExpectInvalid(Create(0, 2, &rank1), "communicator is rank 1 of 2, the options say rank 0 of 2");
  ExpectInvalid(Create(0, 2, &world3), "rank 0 of 3");
  ExpectInvalid(Create(0, 1, &world2), "the options say rank 0 of 1");
}

TEST_F(CudaLlamaTpOptionsTest, WorldLargerThanTheKvHeads) {
  FakeComm comm(0, 2);
  ExpectInvalid(Create(0, 2, &comm), "exceeds the model's 1 K/V heads");
}

}  // namespace
}  // namespace rill::worker
