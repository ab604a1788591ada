// One CUDA rank in a rill-worker process (--distributed_executor_backend=mp)
// against the in-process CUDA engine, on a GPU box (the bundle of
// tools/cuda_model_bundle.sh): the rank joins a one-rank NCCL communicator
// from the engine's unique id, sizes its KV cache in the two-phase
// negotiation, and its greedy tokens equal the in-process engine's (the same
// kernels on the same batches); Sleep(1)/Sleep(2)/WakeUp reach the worker;
// a device the worker cannot see fails start-up naming the rank. Skipped
// without a CUDA device. rill-worker is found next to this binary (the
// bundle) or in bazel-bin/worker.
#include <sys/stat.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/model_path.h"
#include "engine/stream_drain.h"
#include "kernels/cuda/device_probe.h"

namespace rill::engine {
namespace {

// RILL_TEST_MODEL (the GPU bundle's trimmed GGUF), else the default model.
std::string ModelPath() {
  const char* env = getenv("RILL_TEST_MODEL");
  return env != nullptr && *env != '\0' ? std::string(env) : ResolveModelPath("default");
}

EngineArgs CudaArgs(const std::string& executor) {
  EngineArgs args;
  args.model = ModelPath();
  args.backend = "cuda";
  args.distributed_executor_backend = executor;
  args.gpu_memory_utilization = 0.5;
  args.max_model_len = 256;
  args.max_num_seqs = 8;
  args.max_num_batched_tokens = 256;
  return args;
}

std::vector<int32_t> Greedy(AsyncLLMEngine* engine, const std::string& prompt,
                            const std::string& id) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 8;
  p.ignore_eos = true;
  auto stream = engine->Generate(prompt, p, id);
  EXPECT_TRUE(stream.ok()) << stream.status();
  if (!stream.ok()) return {};
  RequestOutput last = engine::testing::LastOutput(**stream, absl::Seconds(120));
  EXPECT_TRUE(last.finished) << id;
  return last.outputs.empty() ? std::vector<int32_t>{} : last.outputs[0].token_ids;
}

const std::vector<std::string>& Prompts() {
  static const std::vector<std::string> prompts = {
      "The capital of France is", "def fibonacci(n):", "Once upon a time, there was a",
      "Water boils at a temperature of"};
  return prompts;
}

void SkipWithoutDeviceOrModel() {
  struct stat st;
  if (!kernels::cuda::ProbeCudaDevices().ok()) GTEST_SKIP() << "no CUDA device";
  if (stat(ModelPath().c_str(), &st) != 0) GTEST_SKIP() << "no model at " << ModelPath();
}

TEST(CudaRankDeviceTest, OneRankInAWorkerGivesTheInProcessGreedyTokens) {
  SkipWithoutDeviceOrModel();
  if (IsSkipped()) return;
  // One engine at a time: each sizes its KV cache from what the GPU has left.
  std::vector<std::vector<int32_t>> in_process;
  {
    auto e = CreateAsyncLLMEngine(CudaArgs("uni"));
    ASSERT_TRUE(e.ok()) << e.status();
    for (size_t i = 0; i < Prompts().size(); ++i) {
      in_process.push_back(Greedy(e->get(), Prompts()[i], "u" + std::to_string(i)));
    }
  }
  auto e = CreateAsyncLLMEngine(CudaArgs("mp"));
  ASSERT_TRUE(e.ok()) << e.status();
  const EngineConfig& c = (*e)->GetEngineConfig();
  EXPECT_EQ(c.parallel.backend, "cuda");
  EXPECT_EQ(c.parallel.communicator, "nccl");
  EXPECT_EQ(c.cache.kv_cache_dtype, "bfloat16");
  EXPECT_GT(c.cache.num_blocks, 16);
  EXPECT_GT(c.cache.kv_cache_bytes, 0);
  absl::StatusOr<std::vector<std::string>> info = (*e)->CollectiveRpc("get_worker_info");
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->size(), 1u);
  std::cout << "worker rank 0: " << (*info)[0] << "\n";
  EXPECT_TRUE(absl::StrContains((*info)[0], "\"communicator\":\"nccl\",\"backend\":\"cuda\""))
      << (*info)[0];
  EXPECT_TRUE(absl::StrContains((*info)[0], "\"nccl_version\":\"2.")) << (*info)[0];
  for (size_t i = 0; i < Prompts().size(); ++i) {
    const std::vector<int32_t> tokens = Greedy(e->get(), Prompts()[i], "m" + std::to_string(i));
    ASSERT_EQ(tokens.size(), 8u);
    EXPECT_EQ(tokens, in_process[i]) << "prompt " << i << ": " << Prompts()[i];
  }
  for (int level : {1, 2}) {
    ASSERT_TRUE((*e)->Sleep(level).ok()) << level;
    ASSERT_TRUE((*e)->WakeUp().ok()) << level;
    EXPECT_EQ(Greedy(e->get(), Prompts()[0], "wake" + std::to_string(level)), in_process[0])
        << "after Sleep(" << level << ")";
  }
}

TEST(CudaRankDeviceTest, InvisibleDeviceFailsStartNamingTheRank) {
  SkipWithoutDeviceOrModel();
  if (IsSkipped()) return;
  EngineArgs args = CudaArgs("mp");
  args.cuda_devices = "63";
  auto e = CreateAsyncLLMEngine(args);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition) << e.status();
  EXPECT_TRUE(absl::StrContains(e.status().message(),
                                "worker rank 0 failed to start: CUDA device 63"))
      << e.status();
}

}  // namespace
}  // namespace rill::engine
