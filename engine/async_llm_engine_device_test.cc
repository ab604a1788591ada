// EngineArgs::backend and gpu_memory_utilization through AsyncLLMEngine::Create:
// bad values are refused with a clear error; "cuda" without a usable device
// is FailedPrecondition; "auto" without one serves on the CPU. With a CUDA
// device (a GPU box running the bundle), "cuda" serves the default model and
// its greedy tokens start like the CPU engine's.
#include <sys/stat.h>

#include <iostream>
#include <memory>
#include <string>
#include <utility>
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

std::vector<int32_t> Generate(AsyncLLMEngine* engine, const std::string& prompt,
                              const SamplingParams& p, const std::string& id) {
  auto stream = engine->Generate(prompt, p, id);
  EXPECT_TRUE(stream.ok()) << stream.status();
  if (!stream.ok()) return {};
  RequestOutput last = engine::testing::LastOutput(**stream, absl::Seconds(120));
  EXPECT_TRUE(last.finished) << id;
  return last.outputs.empty() ? std::vector<int32_t>{} : last.outputs[0].token_ids;
}

std::vector<int32_t> Greedy(AsyncLLMEngine* engine, const std::string& prompt, int tokens,
                            const std::string& id) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = tokens;
  p.ignore_eos = true;
  return Generate(engine, prompt, p, id);
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
  // Tensor parallelism on cuda runs one rill-worker per GPU over NCCL: on a
  // one-GPU box rank 1 finds no device 1 and start-up fails naming it.
  absl::StatusOr<std::vector<kernels::cuda::CudaDeviceInfo>> devices =
      kernels::cuda::ProbeCudaDevices();
  if (devices->size() == 1) {
    EngineArgs tp = SmallArgs("cuda");
    tp.tensor_parallel_size = 2;
    e = CreateAsyncLLMEngine(tp);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition) << e.status();
    EXPECT_TRUE(absl::StrContains(e.status().message(),
                                  "worker rank 1 failed to start: CUDA device 1"))
        << e.status();
  }
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

// Sampling on the GPU (--device_sampling, the default) against the host
// sampler over the same GPU logits (--device_sampling=false), request by
// request so every step's batch (and so its logits) is the same in both
// runs: greedy tokens identical; seeded sampled requests (temperature,
// min_p, top_k with top_p, top_p alone, penalties, logit_bias, min_tokens) draw the same
// uniforms from their generators, so their tokens agree unless a draw lands
// within float rounding (~1e-5) of a boundary: at most one request of eight
// may diverge.
TEST(EngineDeviceTest, CudaDeviceSamplingGivesTheHostSamplersTokens) {
  if (!HaveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  if (!HaveModel()) GTEST_SKIP() << "no model at " << ModelPath();
  std::vector<std::pair<std::string, SamplingParams>> requests;
  auto add = [&](const std::string& prompt, float temperature, uint64_t seed) -> SamplingParams& {
    SamplingParams p;
    p.temperature = temperature;
    p.seed = seed;
    p.max_tokens = 32;
    p.ignore_eos = true;
    requests.emplace_back(prompt, p);
    return requests.back().second;
  };
  add("The capital of France is", 0.0f, 1);
  add("def fibonacci(n):", 0.0f, 2);
  add("Once upon a time, there was a", 0.8f, 11);
  add("Water boils at a temperature of", 1.2f, 12).min_p = 0.05f;
  SamplingParams& pen = add("List three colours:", 1.0f, 13);
  pen.repetition_penalty = 1.2f;
  pen.presence_penalty = 0.5f;
  pen.frequency_penalty = 0.3f;
  pen.logit_bias = {{28, 2.0f}, {13, -5.0f}};
  SamplingParams& min_tokens = add("Say hi.", 0.7f, 14);
  min_tokens.ignore_eos = false;
  min_tokens.min_tokens = 12;
  add("The best way to learn is", 1.0f, 15);
  add("My favourite food is", 1.0f, 17).top_k = 40;  // descending draw on the device
  SamplingParams& top_k_p = add("Rain is", 0.8f, 18);
  top_k_p.top_k = 100;
  top_k_p.top_p = 0.9f;
  add("Tell me a joke about cats", 0.9f, 16).top_p = 0.9f;  // the nucleus in id order

  auto run = [&](bool device_sampling) {
    EngineArgs args = SmallArgs("cuda");
    args.num_kv_blocks = 0;
    args.gpu_memory_utilization = 0.5;
    args.device_sampling = device_sampling;
    std::vector<std::vector<int32_t>> out;
    auto e = CreateAsyncLLMEngine(args);
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) return out;
    for (size_t i = 0; i < requests.size(); ++i) {
      out.push_back(Generate(e->get(), requests[i].first, requests[i].second,
                             (device_sampling ? "d" : "h") + std::to_string(i)));
    }
    return out;
  };
  const std::vector<std::vector<int32_t>> device = run(true);
  const std::vector<std::vector<int32_t>> host = run(false);
  ASSERT_EQ(device.size(), requests.size());
  ASSERT_EQ(host.size(), requests.size());
  int sampled_diverged = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    size_t same = 0;
    while (same < device[i].size() && same < host[i].size() && device[i][same] == host[i][same]) {
      ++same;
    }
    const bool equal = device[i] == host[i];
    std::cout << "device sampling vs host, request " << i << " (temperature "
              << requests[i].second.temperature << "): " << (equal ? "identical" : "diverges")
              << ", first " << same << " of " << host[i].size() << " tokens equal\n";
    if (requests[i].second.temperature == 0.0f) {
      EXPECT_EQ(device[i], host[i]) << "greedy request " << i;
    } else if (!equal) {
      ++sampled_diverged;
    }
  }
  EXPECT_LE(sampled_diverged, 1) << "seeded sampled requests whose tokens differ";
  EXPECT_EQ(device.back(), host.back()) << "the top_p request samples on the host in both runs";
}

}  // namespace
}  // namespace rill::engine
