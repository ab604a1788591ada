// CUDA tensor-parallel ranks as the engine drives them, without a GPU:
// - the engine side against stand-in ranks on its control socket (what a
//   CUDA rill-worker sends and expects): every rank gets the backend, one
//   NCCL unique id, its devices and the GPU sizing in its WorkerConfig; the
//   KV cache is the smallest room the ranks report, allocated in a second
//   round; the config reports nccl; steps return rank 0's logits, or its
//   device-sampled tokens for the rows sent with a sampling spec;
// - real rill-worker processes asked to run on CUDA here: start-up fails at
//   once naming the rank and the reason (no device), through the executor
//   and through the engine factory (tensor_parallel_size 2 and the one-rank
//   --distributed_executor_backend=mp);
// - --distributed_executor_backend=mp on the CPU: one rank in a worker
//   process gives the in-process engine's greedy tokens.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/model_dir.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/model_path.h"
#include "engine/multiproc_executor.h"
#include "engine/stream_drain.h"
#include "kernels/cuda/device_probe.h"
#include "rill/internal/worker.pb.h"
#include "tests/util/subprocess.h"
#include "worker/ipc/frame.h"

namespace rill::engine {
namespace {

using rill::internal::WorkerCommand;
using rill::internal::WorkerConfig;
using rill::internal::WorkerReply;

constexpr int kVocab = 4;

// One stand-in CUDA rank: connects to the engine's socket, records the
// WorkerConfig it gets, reports `blocks_fit`, then answers commands as
// rill-worker does (rank 0's steps return one row of kVocab logits).
class FakeCudaRank {
 public:
  FakeCudaRank(const std::string& socket_path, int rank, int64_t blocks_fit)
      : rank_(rank), blocks_fit_(blocks_fit) {
    thread_ = std::thread([this, socket_path] { Run(socket_path); });
  }
  ~FakeCudaRank() { thread_.join(); }

  WorkerConfig config() const {
    absl::MutexLock lock(&mu_);
    return config_;
  }
  std::vector<int> allocations() const {
    absl::MutexLock lock(&mu_);
    return allocations_;
  }
  std::vector<rill::internal::DeviceSampling> device_sampled() const {
    absl::MutexLock lock(&mu_);
    return device_sampled_;
  }

 private:
  static int Connect(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    for (int i = 0; i < 600; ++i) {
      const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
      close(fd);
      absl::SleepFor(absl::Milliseconds(50));
    }
    return -1;
  }

  void Run(const std::string& path) {
    const int fd = Connect(path);
    ASSERT_GE(fd, 0) << "rank " << rank_ << " could not reach " << path;
    rill::internal::WorkerHello hello;
    hello.set_rank(rank_);
    hello.set_pid(getpid());
    ASSERT_TRUE(worker::WriteFrame(fd, hello.SerializeAsString()).ok());
    std::string header;
    ASSERT_TRUE(worker::ReadFrame(fd, &header, nullptr).ok());
    {
      absl::MutexLock lock(&mu_);
      ASSERT_TRUE(config_.ParseFromString(header));
    }
    rill::internal::WorkerReady ready;
    ready.set_num_kv_heads(1);
    ready.set_communicator("nccl");
    ready.set_kv_blocks_fit(blocks_fit_);
    ready.set_device(absl::StrCat("cuda:", rank_, " (fake)"));
    ready.set_nccl_version("2.28.9");
    ASSERT_TRUE(worker::WriteFrame(fd, ready.SerializeAsString()).ok());
    int blocks = 0;
    while (worker::ReadFrame(fd, &header, nullptr).ok()) {
      WorkerCommand cmd;
      ASSERT_TRUE(cmd.ParseFromString(header));
      WorkerReply reply;
      reply.set_seq(cmd.seq());
      std::vector<float> logits;
      if (cmd.has_allocate_kv_blocks()) {
        blocks = cmd.allocate_kv_blocks();
        absl::MutexLock lock(&mu_);
        allocations_.push_back(blocks);
      }
      if (cmd.has_allocate_kv_blocks() || cmd.has_get_info()) {
        reply.mutable_info()->set_rank(rank_);
        reply.mutable_info()->set_kv_cache_bytes(int64_t{blocks} * 1000);
        reply.mutable_info()->set_communicator("nccl");
        reply.mutable_info()->set_backend("cuda");
        reply.mutable_info()->set_device(absl::StrCat("cuda:", rank_, " (fake)"));
        reply.mutable_info()->set_nccl_version("2.28.9");
      }
      if (cmd.has_step() && rank_ == 0) {
        // As the CUDA rank: a sequence with device sampling comes back as a
        // token (here the uniform * 1000) instead of a logits row.
        reply.set_vocab(kVocab);
        bool any_device = false;
        for (const rill::internal::StepSequence& seq : cmd.step().sequences()) {
          any_device |= seq.has_device_sampling();
        }
        for (int s = 0; s < cmd.step().sequences_size(); ++s) {
          const rill::internal::StepSequence& seq = cmd.step().sequences(s);
          if (any_device) {
            rill::internal::SampledToken* t = reply.add_sampled();
            t->set_token(seq.has_device_sampling()
                             ? static_cast<int>(seq.device_sampling().uniform() * 1000)
                             : -1);
            t->set_logprob(-0.5f);
          }
          if (seq.has_device_sampling()) {
            absl::MutexLock lock(&mu_);
            device_sampled_.push_back(seq.device_sampling());
            reply.add_logit_rows(0);
            continue;
          }
          reply.add_logit_rows(1);
          for (int v = 0; v < kVocab; ++v) logits.push_back(static_cast<float>(s * kVocab + v));
        }
      }
      const absl::Status written = worker::WriteFrame(fd, reply.SerializeAsString(),
                                                      logits.data(), logits.size() * sizeof(float));
      // The engine may close its end without reading the shutdown's reply.
      if (cmd.has_shutdown()) break;
      ASSERT_TRUE(written.ok()) << written;
    }
    close(fd);
  }

  const int rank_;
  const int64_t blocks_fit_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  WorkerConfig config_ ABSL_GUARDED_BY(mu_);
  std::vector<int> allocations_ ABSL_GUARDED_BY(mu_);
  std::vector<rill::internal::DeviceSampling> device_sampled_ ABSL_GUARDED_BY(mu_);
};

std::string TempDir(const std::string& prefix) {
  std::string tmpl = absl::StrCat("/tmp/", prefix, "-XXXXXX");
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

MultiprocExecutorOptions CudaOptions(int tp) {
  MultiprocExecutorOptions o;
  o.model_path = ResolveModelPath("default");
  o.worker_binary = tests::util::RunfilePath("worker/rill-worker");
  o.tensor_parallel_size = tp;
  o.backend = "cuda";
  o.gpu_memory_utilization = 0.8;
  o.max_batch_tokens = 512;
  o.block_size = 16;
  o.start_timeout = absl::Seconds(60);
  return o;
}

TEST(MultiprocCudaRanks, ConfigCarriesNcclIdAndSizingAndTheSmallestRoomIsAllocated) {
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  const std::string dir = TempDir("rill-fake-cuda");
  MultiprocExecutorOptions o = CudaOptions(2);
  o.external_workers_dir = dir;
  o.cuda_devices = {3, 1};
  o.max_model_len = 2048;  // 128 blocks of 16: both ranks fit it.
  const std::string sock = dir + "/control.sock";
  {
    FakeCudaRank rank0(sock, 0, 900), rank1(sock, 1, 700);
    absl::StatusOr<std::unique_ptr<MultiprocExecutor>> ex = MultiprocExecutor::Create(o);
    ASSERT_TRUE(ex.ok()) << ex.status();
    EXPECT_EQ((*ex)->num_blocks(), 700);
    EXPECT_EQ((*ex)->kv_cache_bytes(), 2 * 700 * 1000);
    EXPECT_EQ((*ex)->backend(), "cuda");
    EXPECT_EQ((*ex)->communicator(), "nccl");
    EXPECT_EQ((*ex)->kv_cache_dtype(), "bfloat16");
    EXPECT_EQ((*ex)->kernel_plan(), "");
    for (const FakeCudaRank* r : {&rank0, &rank1}) {
      const WorkerConfig c = r->config();
      EXPECT_EQ(c.backend(), "cuda");
      EXPECT_EQ(c.world_size(), 2);
      EXPECT_EQ(c.nccl_unique_id().size(), 128u);
      EXPECT_EQ(std::vector<int>(c.cuda_devices().begin(), c.cuda_devices().end()),
                (std::vector<int>{3, 1}));
      EXPECT_DOUBLE_EQ(c.gpu_memory_utilization(), 0.8);
      EXPECT_EQ(c.max_batch_tokens(), 512);
      EXPECT_EQ(c.block_size(), 16);
      EXPECT_TRUE(c.rendezvous_dir().empty());  // No gloo.
      EXPECT_EQ(r->allocations(), std::vector<int>{700});
    }
    // One id for the whole group.
    EXPECT_EQ(rank0.config().nccl_unique_id(), rank1.config().nccl_unique_id());

    worker::ForwardBatch batch;
    batch.sequences.push_back({{1, 2, 3}, 0, {0}, false});
    batch.sequences.push_back({{4}, 0, {1}, false});
    worker::ForwardOutput out;
    ASSERT_TRUE((*ex)->Execute(batch, &out).ok());
    ASSERT_EQ(out.logits.size(), 2u);
    EXPECT_EQ(out.logits[1], (std::vector<float>{4, 5, 6, 7}));
    EXPECT_TRUE(out.sampled.empty());

    // Rank 0 samples on its GPU the rows the engine sends there: the spec
    // crosses whole, and only the token (and logprob) comes back.
    EXPECT_TRUE((*ex)->samples_on_device());
    worker::DeviceSampling spec;
    spec.temperature = 0.5f;
    spec.top_k = 20;
    spec.uniform = 0.25;
    spec.edits = {{3, 1.1f, 0.2f, 0.0f, false}};
    batch.sequences[0].device_sampling = spec;
    ASSERT_TRUE((*ex)->Execute(batch, &out).ok());
    ASSERT_EQ(out.sampled.size(), 2u);
    EXPECT_EQ(out.sampled[0].token, 250);
    EXPECT_EQ(out.sampled[0].logprob, -0.5f);
    EXPECT_TRUE(out.logits[0].empty());
    EXPECT_EQ(out.sampled[1].token, -1);
    EXPECT_EQ(out.logits[1], (std::vector<float>{4, 5, 6, 7}));
    const std::vector<rill::internal::DeviceSampling> sent = rank0.device_sampled();
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].temperature(), 0.5f);
    EXPECT_EQ(sent[0].top_k(), 20);
    ASSERT_EQ(sent[0].edits_size(), 1);
    EXPECT_EQ(sent[0].edits(0).repetition(), 1.1f);
    absl::StatusOr<std::vector<std::string>> info = (*ex)->CollectiveRpc("get_worker_info");
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_NE((*info)[1].find("\"communicator\":\"nccl\",\"backend\":\"cuda\",\"device\":"
                              "\"cuda:1 (fake)\",\"nccl_version\":\"2.28.9\""),
              std::string::npos)
        << (*info)[1];
  }  // The executor shuts the fake ranks down before they are joined.
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// A fresh id per engine start: a restarted engine never joins the old group.
TEST(MultiprocCudaRanks, EachStartMakesItsOwnNcclId) {
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  std::vector<std::string> ids;
  for (int start = 0; start < 2; ++start) {
    const std::string dir = TempDir("rill-fake-cuda");
    MultiprocExecutorOptions o = CudaOptions(1);
    o.external_workers_dir = dir;
    {
      FakeCudaRank rank0(dir + "/control.sock", 0, 100);
      absl::StatusOr<std::unique_ptr<MultiprocExecutor>> ex = MultiprocExecutor::Create(o);
      ASSERT_TRUE(ex.ok()) << ex.status();
      EXPECT_EQ((*ex)->num_blocks(), 100);
      // External workers choose their own device when the engine lists none.
      EXPECT_EQ(rank0.config().cuda_devices_size(), 0);
      ids.push_back(rank0.config().nccl_unique_id());
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  EXPECT_NE(ids[0], ids[1]);
}

// The ranks' room decides: a fixed --num_kv_blocks or a max_model_len that
// one rank cannot hold fails start-up naming that rank, and the ranks are
// told to shut down.
TEST(MultiprocCudaRanks, BlocksThatDoNotFitARankFailStartNamingIt) {
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  const std::string dir = TempDir("rill-fake-cuda");
  MultiprocExecutorOptions o = CudaOptions(2);
  o.external_workers_dir = dir;
  o.num_blocks = 800;
  {
    FakeCudaRank rank0(dir + "/control.sock", 0, 900), rank1(dir + "/control.sock", 1, 700);
    absl::StatusOr<std::unique_ptr<MultiprocExecutor>> ex = MultiprocExecutor::Create(o);
    ASSERT_EQ(ex.status().code(), absl::StatusCode::kResourceExhausted) << ex.status();
    EXPECT_NE(ex.status().message().find("worker rank 1's device holds 700 KV blocks"),
              std::string::npos)
        << ex.status();
    EXPECT_TRUE(rank0.allocations().empty());
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

bool HasCudaDevice() { return kernels::cuda::ProbeCudaDevices().ok(); }

void ExpectNoDeviceError(const absl::Status& s) {
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message().rfind("worker rank ", 0), 0u) << s;
  EXPECT_NE(s.message().find(" failed to start: the CUDA backend needs a CUDA device"),
            std::string::npos)
      << s;
}

TEST(MultiprocCudaRanks, WithoutADeviceRealWorkersFailFastNamingTheRank) {
  if (HasCudaDevice()) GTEST_SKIP() << "a CUDA device is present";
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<MultiprocExecutor>> ex = MultiprocExecutor::Create(CudaOptions(2));
  ASSERT_FALSE(ex.ok());
  ExpectNoDeviceError(ex.status());
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

EngineArgs CudaArgs() {
  EngineArgs a;
  a.backend = "cuda";
  a.worker_binary = tests::util::RunfilePath("worker/rill-worker");
  return a;
}

TEST(MultiprocCudaRanks, EngineFactoryRoutesCudaRanksToWorkers) {
  if (HasCudaDevice()) GTEST_SKIP() << "a CUDA device is present";
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  EngineArgs a = CudaArgs();
  a.tensor_parallel_size = 2;
  ExpectNoDeviceError(CreateAsyncLLMEngine(a).status());
  // One rank in a worker process: the NCCL path on a one-GPU machine.
  a = CudaArgs();
  a.distributed_executor_backend = "mp";
  ExpectNoDeviceError(CreateAsyncLLMEngine(a).status());
  // Refused before any worker starts.
  a = CudaArgs();
  a.tensor_parallel_size = 2;
  a.cuda_devices = "0,x";
  EXPECT_EQ(CreateAsyncLLMEngine(a).status().code(), absl::StatusCode::kInvalidArgument);
  a.cuda_devices = "0";
  absl::Status s = CreateAsyncLLMEngine(a).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("list one per rank"), std::string::npos) << s;
  a = CudaArgs();
  a.tensor_parallel_size = 2;
  a.distributed_executor_backend = "uni";
  EXPECT_EQ(CreateAsyncLLMEngine(a).status().code(), absl::StatusCode::kInvalidArgument);
  a = CudaArgs();
  a.distributed_executor_backend = "mp";
  a.kv_cache_dtype = "float16";
  EXPECT_EQ(CreateAsyncLLMEngine(a).status().code(), absl::StatusCode::kInvalidArgument);
}

SamplingParams Greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

std::vector<int32_t> GreedyTokens(AsyncLLMEngine* engine) {
  absl::StatusOr<std::shared_ptr<RequestOutputStream>> s =
      engine->Generate("The capital of France is", Greedy(8), "r");
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  RequestOutput last = engine::testing::LastOutput(**s, absl::Seconds(120));
  EXPECT_TRUE(last.finished);
  return last.outputs.empty() ? std::vector<int32_t>{} : last.outputs[0].token_ids;
}

TEST(MultiprocCpuOneRank, MpBackendRunsOneWorkerProcessWithTheInProcessTokens) {
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  EngineArgs a;
  a.backend = "cpu";
  a.kv_cache_mb = 64;
  a.threads = 2;
  a.worker_binary = tests::util::RunfilePath("worker/rill-worker");
  std::vector<int32_t> in_process, worker;
  {
    absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> e = CreateAsyncLLMEngine(a);
    ASSERT_TRUE(e.ok()) << e.status();
    in_process = GreedyTokens(e->get());
  }
  a.distributed_executor_backend = "mp";
  {
    absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> e = CreateAsyncLLMEngine(a);
    ASSERT_TRUE(e.ok()) << e.status();
    worker = GreedyTokens(e->get());
    absl::StatusOr<std::vector<std::string>> info = (*e)->CollectiveRpc("get_worker_info");
    ASSERT_TRUE(info.ok()) << info.status();
    ASSERT_EQ(info->size(), 1u);
    EXPECT_NE((*info)[0].find("\"process\":\"rill-worker\""), std::string::npos) << (*info)[0];
    EXPECT_NE((*info)[0].find("\"backend\":\"cpu\""), std::string::npos) << (*info)[0];
    EXPECT_EQ((*e)->GetEngineConfig().parallel.communicator, "none");
  }
  EXPECT_FALSE(in_process.empty());
  EXPECT_EQ(worker, in_process);
}

}  // namespace
}  // namespace rill::engine
