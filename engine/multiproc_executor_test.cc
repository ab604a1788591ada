// Tensor parallelism through real rill-worker processes: TP=2 gives the same
// greedy outputs as the in-process TP=1 engine for 10 prompts (run together,
// so steps batch them), collective RPCs reach every rank, sleep/wake works
// across processes, and a killed worker makes the engine unhealthy with the
// reason, fails what is running instead of hanging, and leaves no process.
#include "engine/multiproc_executor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/model_dir.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/model_path.h"
#include "tests/util/subprocess.h"
#include "worker/lora/lora_adapter.h"

namespace rill::engine {
namespace {

EngineArgs Args(int tp) {
  EngineArgs a;
  a.tensor_parallel_size = tp;
  a.worker_binary = tests::util::RunfilePath("worker/rill-worker");
  a.kv_cache_mb = 64;
  a.threads = 2;
  return a;
}

// An unknown matmul is refused before any worker starts, naming the values.
TEST(MultiprocMatmul, UnknownValueIsInvalidArgument) {
  EngineArgs a = Args(2);
  a.matmul = "fast";
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine = CreateAsyncLLMEngine(a);
  ASSERT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument) << engine.status();
  // Refused before any worker starts, naming the flag and what it accepts.
  EXPECT_NE(engine.status().message().find("--matmul"), std::string::npos) << engine.status();
  EXPECT_NE(engine.status().message().find("auto, exact, int16, q8"), std::string::npos)
      << engine.status();
}

SamplingParams Greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

std::vector<RequestOutput> RunAll(AsyncLLMEngine* engine, const std::vector<std::string>& prompts,
                                  int max_tokens) {
  std::vector<std::shared_ptr<RequestOutputStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto s = engine->Generate(prompts[i], Greedy(max_tokens), absl::StrCat("r", i));
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) streams.push_back(*s);
  }
  std::vector<RequestOutput> outs(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    while (true) {
      absl::StatusOr<RequestOutput> o = streams[i]->Next(absl::Seconds(300));
      if (!o.ok()) break;
      outs[i] = std::move(*o);
    }
    EXPECT_TRUE(outs[i].finished);
  }
  return outs;
}

std::vector<std::string> TenPrompts() {
  return {"The capital of France is",
          "Write one sentence about the ocean.",
          "List three colors:",
          "def fibonacci(n):",
          "Once upon a time, in a small village,",
          "The three laws of motion are",
          "Translate to French: good morning",
          "Q: What is 12 times 12?\nA:",
          "A haiku about rivers:",
          "The best way to learn a language is"};
}

bool ProcessGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

TEST(MultiprocExecutorTest, TwoRanksMatchOneRankGreedyOnTenPrompts) {
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  std::vector<RequestOutput> base, tp;
  {
    absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> one = CreateAsyncLLMEngine(Args(1));
    ASSERT_TRUE(one.ok()) << one.status();
    base = RunAll(one->get(), TenPrompts(), 24);
    // One rank: no collectives, nothing observed.
    EXPECT_EQ((*one)->GetStats().tp_collective_seconds, 0);
    EXPECT_NE((*one)->Metrics().Exposition().find("rill:tp_collective_seconds_count{"),
              std::string::npos);
  }
  std::vector<pid_t> pids;
  {
    absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> two = CreateAsyncLLMEngine(Args(2));
    ASSERT_TRUE(two.ok()) << two.status();
    EXPECT_EQ((*two)->GetEngineConfig().parallel.tensor_parallel_size, 2);
    // The ranks run the engine's kernel plan (the default: exact).
    const std::string& plan = (*two)->GetEngineConfig().parallel.kernel_plan;
    EXPECT_EQ(plan.rfind("exact (", 0), 0u) << plan;
    // LoRA adapters run at tensor_parallel_size 1 only: a clear refusal.
    absl::StatusOr<LoraInfo> lora = (*two)->AddLora({"x", 0, "/tmp"});
    EXPECT_EQ(lora.status().code(), absl::StatusCode::kUnimplemented) << lora.status();
    EXPECT_FALSE((*two)->GetEngineConfig().lora.enabled);
    tp = RunAll(two->get(), TenPrompts(), 24);
    // The ranks timed their all-reduces and every step reported them.
    const EngineStats stats = (*two)->GetStats();
    EXPECT_GT(stats.tp_collective_seconds, 0);
    EXPECT_LT(stats.tp_collective_seconds, 600);
    const std::string text = (*two)->Metrics().Exposition();
    const size_t count = text.find("rill:tp_collective_seconds_count{");
    ASSERT_NE(count, std::string::npos) << text;
    const std::string line = text.substr(count, text.find('\n', count) - count);
    // Observed per step; the steps counter is published a little later (after
    // the loop iteration), so it may trail by one.
    int64_t observed = 0;
    ASSERT_TRUE(absl::SimpleAtoi(line.substr(line.rfind(' ') + 1), &observed)) << line;
    EXPECT_GE(observed, stats.steps) << line;
    EXPECT_GT(stats.steps, 0);
    absl::StatusOr<std::vector<std::string>> info = (*two)->CollectiveRpc("get_worker_info");
    ASSERT_TRUE(info.ok()) << info.status();
    ASSERT_EQ(info->size(), 2u);
    EXPECT_NE((*info)[0].find("\"rank\":0"), std::string::npos) << (*info)[0];
    EXPECT_NE((*info)[1].find("\"rank\":1"), std::string::npos) << (*info)[1];
    EXPECT_NE((*info)[1].find("\"communicator\":\"gloo\""), std::string::npos) << (*info)[1];
    // SmolLM2's 3 K/V heads: 2 on rank 0, 1 on rank 1.
    EXPECT_NE((*info)[0].find("\"num_kv_heads\":2"), std::string::npos) << (*info)[0];
    EXPECT_NE((*info)[1].find("\"num_kv_heads\":1"), std::string::npos) << (*info)[1];
    absl::StatusOr<std::vector<std::string>> bad = (*two)->CollectiveRpc("exec_shell");
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kPermissionDenied);
  }
  ASSERT_EQ(base.size(), tp.size());
  for (size_t i = 0; i < base.size(); ++i) {
    ASSERT_FALSE(base[i].outputs.empty());
    ASSERT_FALSE(tp[i].outputs.empty());
    EXPECT_EQ(tp[i].outputs[0].token_ids, base[i].outputs[0].token_ids)
        << "prompt " << i << ": TP=1 '" << base[i].outputs[0].text << "' vs TP=2 '"
        << tp[i].outputs[0].text << "'";
  }
}

// An f16 KV cache travels to the worker processes: with the same fixed
// block count the ranks report half the KV bytes, and logits stay close to
// the f32 cache's.
TEST(MultiprocExecutorTest, F16KvCacheReachesTheWorkers) {
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  MultiprocExecutorOptions o;
  o.model_path = ResolveModelPath("default");
  o.worker_binary = tests::util::RunfilePath("worker/rill-worker");
  o.num_blocks = 32;
  o.threads = 2;
  worker::ForwardBatch batch;
  batch.sequences.push_back({{504, 3575, 282, 4649, 314, 1010, 77, 2048}, 0, {0}, false});
  worker::ForwardOutput out32, out16;
  int64_t bytes32 = 0, bytes16 = 0;
  {
    absl::StatusOr<std::unique_ptr<MultiprocExecutor>> ex = MultiprocExecutor::Create(o);
    ASSERT_TRUE(ex.ok()) << ex.status();
    bytes32 = (*ex)->kv_cache_bytes();
    ASSERT_TRUE((*ex)->Execute(batch, &out32).ok());
  }
  o.kv_cache_dtype = kernels::cpu::KvDtype::kF16;
  {
    absl::StatusOr<std::unique_ptr<MultiprocExecutor>> ex = MultiprocExecutor::Create(o);
    ASSERT_TRUE(ex.ok()) << ex.status();
    bytes16 = (*ex)->kv_cache_bytes();
    ASSERT_TRUE((*ex)->Execute(batch, &out16).ok());
  }
  EXPECT_GT(bytes16, 0);
  EXPECT_EQ(2 * bytes16, bytes32);
  ASSERT_EQ(out16.logits.size(), 1u);
  ASSERT_EQ(out16.logits[0].size(), out32.logits[0].size());
  double num = 0, den = 0;
  for (size_t i = 0; i < out32.logits[0].size(); ++i) {
    const double d = out16.logits[0][i] - out32.logits[0][i];
    num += d * d;
    den += double(out32.logits[0][i]) * out32.logits[0][i];
  }
  EXPECT_NE(out16.logits, out32.logits) << "the f16 cache should round something";
  EXPECT_LT(std::sqrt(num / den), 1e-2);
}

TEST(MultiprocExecutorTest, SleepWakeAcrossProcessesAndCleanShutdown) {
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  MultiprocExecutorOptions o;
  o.model_path = ResolveModelPath("default");
  o.worker_binary = tests::util::RunfilePath("worker/rill-worker");
  o.num_blocks = 64;
  o.threads = 2;
  std::vector<pid_t> pids;
  {
    absl::StatusOr<std::unique_ptr<MultiprocExecutor>> ex = MultiprocExecutor::Create(o);
    ASSERT_TRUE(ex.ok()) << ex.status();
    pids = (*ex)->worker_pids();
    EXPECT_GT((*ex)->kv_cache_bytes(), 0);
    worker::ForwardBatch batch;
    batch.sequences.push_back({{504, 3575, 282, 4649, 314}, 0, {0}, false});
    worker::ForwardOutput before, after;
    ASSERT_TRUE((*ex)->Execute(batch, &before).ok());
    ASSERT_TRUE((*ex)->Sleep(1).ok());
    EXPECT_EQ((*ex)->kv_cache_bytes(), 0);
    ASSERT_TRUE((*ex)->WakeUp().ok());
    ASSERT_TRUE((*ex)->Execute(batch, &after).ok());
    EXPECT_EQ(before.logits, after.logits);
    // A bad batch is the caller's error, not a dead executor.
    batch.sequences[0].block_table = {1000};
    absl::Status bad = (*ex)->Execute(batch, &after);
    EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE((*ex)->CheckHealth().ok());
    EXPECT_FALSE((*ex)->supports_lora());
    EXPECT_EQ((*ex)->LoadLora("/tmp", worker::LoraLoadOptions{.max_rank = 8}).status().code(),
              absl::StatusCode::kUnimplemented);
  }
  for (pid_t p : pids) EXPECT_TRUE(ProcessGone(p)) << "worker " << p << " still running";
}

TEST(MultiprocExecutorTest, KilledWorkerMakesTheEngineDeadWithTheReasonAndFailsRequests) {
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine = CreateAsyncLLMEngine(Args(2));
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<std::vector<std::string>> info = (*engine)->CollectiveRpc("get_worker_info");
  ASSERT_TRUE(info.ok());
  // pid of rank 1 from its info JSON.
  const std::string& j = (*info)[1];
  const size_t at = j.find("\"pid\":") + 6;
  const pid_t rank1 = static_cast<pid_t>(std::stol(j.substr(at)));
  const size_t at0 = (*info)[0].find("\"pid\":") + 6;
  const pid_t rank0 = static_cast<pid_t>(std::stol((*info)[0].substr(at0)));

  // A long generation in flight when the worker dies.
  auto stream = (*engine)->Generate("Tell me a long story about a dragon.", Greedy(2000), "long");
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE((*stream)->Next(absl::Seconds(120)).ok());  // first token arrived
  ASSERT_EQ(kill(rank1, SIGKILL), 0);
  RequestOutput last;
  const absl::Time start = absl::Now();
  while (true) {
    absl::StatusOr<RequestOutput> o = (*stream)->Next(absl::Seconds(60));
    ASSERT_TRUE(o.ok()) << "stream did not finish after the worker died: " << o.status();
    last = std::move(*o);
    if (last.finished) break;
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(last.outputs[0].finish_reason, "error");
  absl::Status health = (*engine)->CheckHealth();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(health.message().find("rank 1"), std::string::npos) << health;
  auto refused = (*engine)->Generate("hello", Greedy(4), "after");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  engine->reset();
  EXPECT_TRUE(ProcessGone(rank0));
}

TEST(MultiprocExecutorTest, IdleWorkerDeathIsNoticedByHealth) {
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine = CreateAsyncLLMEngine(Args(2));
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<std::vector<std::string>> info = (*engine)->CollectiveRpc("get_worker_info");
  ASSERT_TRUE(info.ok());
  const size_t at = (*info)[0].find("\"pid\":") + 6;
  ASSERT_EQ(kill(static_cast<pid_t>(std::stol((*info)[0].substr(at))), SIGKILL), 0);
  absl::Status health;
  for (int i = 0; i < 100 && health.ok(); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    health = (*engine)->CheckHealth();
  }
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(health.message().find("rank 0"), std::string::npos) << health;
  EXPECT_NE(health.message().find("signal 9"), std::string::npos) << health;
}

TEST(MultiprocExecutorTest, WorkerDeathIsPushedToTheLoopWithoutAnyCall) {
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine = CreateAsyncLLMEngine(Args(2));
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<std::vector<std::string>> info = (*engine)->CollectiveRpc("get_worker_info");
  ASSERT_TRUE(info.ok());
  const size_t at = (*info)[1].find("\"pid\":") + 6;
  const pid_t rank1 = static_cast<pid_t>(std::stol((*info)[1].substr(at)));
  // A sleeping engine keeps the request waiting and its loop idle: only the
  // executor's death event can end the request now.
  ASSERT_TRUE((*engine)->Sleep(0).ok());
  auto stream = (*engine)->Generate("hello", Greedy(4), "waiting");
  ASSERT_TRUE(stream.ok());
  ASSERT_EQ(kill(rank1, SIGKILL), 0);
  absl::StatusOr<RequestOutput> out = (*stream)->Next(absl::Seconds(20));
  ASSERT_TRUE(out.ok()) << "the waiting request was not failed: " << out.status();
  EXPECT_TRUE(out->finished);
  EXPECT_EQ(out->outputs[0].finish_reason, "error");
  EXPECT_EQ(out->error.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(out->error.message().find("rank 1"), std::string::npos) << out->error;
}

TEST(MultiprocExecutorTest, BadConfigurationsAreClearErrors) {
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  EngineArgs a = Args(4);  // SmolLM2 has 3 K/V heads.
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> e = CreateAsyncLLMEngine(a);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << e.status();
  EXPECT_NE(e.status().message().find("K/V heads"), std::string::npos) << e.status();
  a = Args(2);
  a.worker_binary = "/nonexistent/rill-worker";
  e = CreateAsyncLLMEngine(a);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kNotFound) << e.status();
  a = Args(2);
  a.model = "/nonexistent/model.gguf";
  e = CreateAsyncLLMEngine(a);
  EXPECT_FALSE(e.ok());
}

}  // namespace
}  // namespace rill::engine

namespace rill::engine {
namespace {

// Workers started on their own (as containers of a Kubernetes pod would be),
// before the engine, connecting to the engine's socket in a shared directory.
TEST(MultiprocExecutorTest, ExternalWorkersConnectAndServe) {
  if (!base::DefaultModelFileExists()) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  char tmpl[] = "/tmp/rill-ext-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string bin = tests::util::RunfilePath("worker/rill-worker");
      const std::string rank = absl::StrCat("--rank=", r);
      const std::string sock = absl::StrCat("--control_socket=", dir, "/control.sock");
      execl(bin.c_str(), bin.c_str(), rank.c_str(), sock.c_str(), "--connect_timeout_s=120",
            nullptr);
      _exit(127);
    }
    pids.push_back(pid);
  }
  absl::SleepFor(absl::Milliseconds(300));  // The workers are up first and keep retrying.
  EngineArgs a = Args(2);
  a.worker_binary = "";
  a.external_workers_dir = dir;
  std::vector<RequestOutput> tp;
  {
    absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine = CreateAsyncLLMEngine(a);
    ASSERT_TRUE(engine.ok()) << engine.status();
    tp = RunAll(engine->get(), {"The capital of France is"}, 8);
    absl::StatusOr<std::vector<std::string>> info = (*engine)->CollectiveRpc("get_worker_info");
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_NE((*info)[1].find(absl::StrCat("\"pid\":", pids[1])), std::string::npos) << (*info)[1];
  }
  // The engine's shutdown ends the worker processes cleanly.
  for (pid_t p : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(p, &status, 0), p);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  std::vector<RequestOutput> base;
  {
    absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> one = CreateAsyncLLMEngine(Args(1));
    ASSERT_TRUE(one.ok());
    base = RunAll(one->get(), {"The capital of France is"}, 8);
  }
  EXPECT_EQ(tp[0].outputs[0].token_ids, base[0].outputs[0].token_ids);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace rill::engine
