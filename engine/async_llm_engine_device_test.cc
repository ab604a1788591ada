// EngineArgs::backend and gpu_memory_utilization through AsyncLLMEngine::Create:
// bad values are refused with a clear error; "cuda" without a usable device
// is FailedPrecondition; "auto" without one serves on the CPU. With a CUDA
// device (a GPU box running the bundle), "cuda" serves the default model and
// its greedy tokens start like the CPU engine's.
#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/model_path.h"
#include "kernels/cuda/device_probe.h"

namespace rill::engine {
namespace {

// RILL_TEST_MODEL (the GPU bundle's trimmed GGUF), else the default model.
std::string ModelPath() {
  const char* env = getenv("RILL_TEST_MODEL");
  return env != nullptr && *env != '\0' ? std::string(env) : ResolveModelPath("default");
}

bool HaveModel() {
  struct stat st;
  return stat(ModelPath().c_str(), &st) == 0;
}

bool HaveCudaDevice() { return kernels::cuda::ProbeCudaDevices().ok(); }

EngineArgs SmallArgs(const std::string& backend) {
  EngineArgs args;
  args.model = ModelPath();
  args.backend = backend;
  args.kv_cache_mb = 64;
  args.max_model_len = 256;
  args.max_num_seqs = 8;
  args.max_num_batched_tokens = 256;
  return args;
}

std::vector<int32_t> Greedy(AsyncLLMEngine* engine, const std::string& prompt, int tokens,
                            const std::string& id) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = tokens;
  p.ignore_eos = true;
  auto stream = engine->Generate(prompt, p, id);
  EXPECT_TRUE(stream.ok()) << stream.status();
  if (!stream.ok()) return {};
  RequestOutput last;
  while (true) {
    absl::StatusOr<RequestOutput> o = (*stream)->Next(absl::Seconds(120));
    if (!o.ok()) break;
    last = std::move(*o);
  }
  EXPECT_TRUE(last.finished) << id;
  return last.outputs.empty() ? std::vector<int32_t>{} : last.outputs[0].token_ids;
}

TEST(EngineDeviceTest, UnknownBackendIsInvalidArgument) {
  auto e = CreateAsyncLLMEngine(SmallArgs("tpu"));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << e.status();
  EXPECT_TRUE(absl::StrContains(e.status().message(), "unknown backend 'tpu'")) << e.status();
}

TEST(EngineDeviceTest, GpuMemoryUtilizationOutsideRangeIsInvalidArgument) {
  for (double u : {0.0, -0.5, 1.5}) {
    EngineArgs args = SmallArgs("cpu");
    args.gpu_memory_utilization = u;
    auto e = CreateAsyncLLMEngine(args);
    ASSERT_FALSE(e.ok()) << u;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << e.status();
    EXPECT_TRUE(absl::StrContains(e.status().message(), "gpu_memory_utilization")) << e.status();
  }
}

TEST(EngineDeviceTest, CudaWithoutDeviceIsFailedPrecondition) {
  if (HaveCudaDevice()) GTEST_SKIP() << "this machine has a CUDA device";
  auto e = CreateAsyncLLMEngine(SmallArgs("cuda"));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition) << e.status();
  EXPECT_TRUE(absl::StrContains(e.status().message(), "cuda requested but")) << e.status();
}

TEST(EngineDeviceTest, AutoWithoutDeviceServesOnCpu) {
  if (HaveCudaDevice()) GTEST_SKIP() << "this machine has a CUDA device";
  if (!HaveModel()) GTEST_SKIP() << "no model at " << ModelPath();
  auto e = CreateAsyncLLMEngine(SmallArgs("auto"));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)->GetEngineConfig().parallel.backend, "cpu");
  EXPECT_EQ((*e)->GetEngineConfig().cache.kv_cache_dtype, "float32");
  EXPECT_EQ(Greedy(e->get(), "The capital of France is", 4, "auto").size(), 4u);
}

TEST(EngineDeviceTest, CudaRefusesOptionsItCannotRun) {
  if (!HaveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  if (!HaveModel()) GTEST_SKIP() << "no model at " << ModelPath();
  EngineArgs f16 = SmallArgs("cuda");
  f16.kv_cache_dtype = "float16";
  auto e = CreateAsyncLLMEngine(f16);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << e.status();
  EngineArgs tp = SmallArgs("cuda");
  tp.tensor_parallel_size = 2;
  e = CreateAsyncLLMEngine(tp);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kUnimplemented) << e.status();
}

// The GPU engine against the CPU engine on the same prompts: bf16 weights and
// activations drift from f32 after a few tokens (and the bundle's model is
// cut to a few layers, so margins are thin), so only the first token must
// agree, on most prompts. Then Sleep(1)/Sleep(2) and WakeUp give the
// same tokens again.
TEST(EngineDeviceTest, CudaGreedyStartsLikeCpuAndSurvivesSleep) {
  if (!HaveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  if (!HaveModel()) GTEST_SKIP() << "no model at " << ModelPath();
  EngineArgs cuda_args = SmallArgs("cuda");
  cuda_args.num_kv_blocks = 0;  // sized from gpu_memory_utilization
  cuda_args.gpu_memory_utilization = 0.5;
  auto gpu = CreateAsyncLLMEngine(cuda_args);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const EngineConfig& c = (*gpu)->GetEngineConfig();
  EXPECT_EQ(c.parallel.backend, "cuda");
  EXPECT_EQ(c.cache.kv_cache_dtype, "bfloat16");
  EXPECT_GT(c.cache.num_blocks, 16);
  auto cpu = CreateAsyncLLMEngine(SmallArgs("cpu"));
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  const std::vector<std::string> prompts = {
      "The capital of France is", "def fibonacci(n):", "Once upon a time, there was a",
      "Water boils at a temperature of"};
  int agree = 0;
  std::vector<std::vector<int32_t>> gpu_tokens;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t> g = Greedy(gpu->get(), prompts[i], 8, "g" + std::to_string(i));
    const std::vector<int32_t> r = Greedy(cpu->get(), prompts[i], 8, "c" + std::to_string(i));
    ASSERT_EQ(g.size(), 8u);
    ASSERT_EQ(r.size(), 8u);
    if (g[0] == r[0]) ++agree;
    gpu_tokens.push_back(g);
  }
  EXPECT_GE(agree, 3) << "the first greedy token agrees on " << agree << " of 4 prompts";

  for (int level : {1, 2}) {
    ASSERT_TRUE((*gpu)->Sleep(level).ok());
    EXPECT_TRUE((*gpu)->IsSleeping());
    ASSERT_TRUE((*gpu)->WakeUp().ok());
    EXPECT_EQ(Greedy(gpu->get(), prompts[0], 8, "wake" + std::to_string(level)), gpu_tokens[0])
        << "after Sleep(" << level << ")";
  }
}

}  // namespace
}  // namespace rill::engine
