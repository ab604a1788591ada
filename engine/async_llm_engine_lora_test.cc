// LoRA through AsyncLLMEngine over a real (tiny, random) model: Generate with
// an adapter equals the engine of the offline-merged model, concurrent
// requests of four adapters and the base model each get what they get
// alone (under a max_loras limit too), the prefix cache never serves one
// adapter's blocks to another, and bad adapters fail clearly while the
// engine keeps serving.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/async_llm_engine.h"
#include "engine/local_model_executor.h"
#include "engine/stream_drain.h"
#include "tests/util/test_seed.h"
#include "worker/lora/lora_test_util.h"

namespace rill::engine {
namespace {

namespace wt = rill::worker::testing;

constexpr int kTokens = 10;

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = kTokens;
  p.ignore_eos = true;
  return p;
}

std::unique_ptr<AsyncLLMEngine> MakeEngine(const std::string& model, EngineArgs args = {}) {
  LocalExecutorOptions o;
  o.model_path = model;
  o.num_blocks = 64;
  o.block_size = 4;  // Small blocks: short prompts fill some (prefix cache).
  o.threads = 2;
  absl::StatusOr<std::unique_ptr<LocalModelExecutor>> ex = LocalModelExecutor::Create(o);
  EXPECT_TRUE(ex.ok()) << ex.status();
  if (!ex.ok()) return nullptr;
  args.max_num_seqs = 16;
  args.max_num_batched_tokens = 64;
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> e =
      AsyncLLMEngine::Create(args, std::move(*ex), nullptr);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

std::vector<int32_t> Collect(const std::shared_ptr<RequestOutputStream>& stream) {
  RequestOutput last = engine::testing::LastOutput(*stream, absl::Seconds(120));
  EXPECT_TRUE(last.finished) << stream->request_id();
  EXPECT_TRUE(last.error.ok()) << last.error;
  return last.outputs.empty() ? std::vector<int32_t>{} : last.outputs[0].token_ids;
}

std::vector<int32_t> RunOne(AsyncLLMEngine* e, const std::vector<int32_t>& prompt,
                            const std::string& id, const std::string& lora = "") {
  absl::StatusOr<std::shared_ptr<RequestOutputStream>> s =
      e->Generate(prompt, Greedy(), id, 0, absl::InfinitePast(), lora);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? Collect(*s) : std::vector<int32_t>{};
}

class LoraEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = static_cast<uint32_t>(rill::tests::util::StreamSeed(0));
    std::cout << "seed " << seed_ << "\n";
    rng_.seed(seed_);
    root_ = absl::StrCat(wt::TempDir(), "/lora_engine_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(root_ + "/adapters");
    base_ = wt::RandomModel(spec_, &rng_);
    ASSERT_TRUE(wt::WriteGgufModel(root_ + "/base.gguf", spec_, base_).ok());
    for (int i = 0; i < 4; ++i) {
      wt::AdapterSpec a;
      a.rank = 2 + 2 * i;
      a.alpha = 8;
      if (i == 1) a.targets = {"q_proj", "v_proj"};
      if (i == 2) a.targets = {"gate_proj", "up_proj", "down_proj"};
      specs_.push_back(a);
      adapters_.push_back(wt::RandomAdapter(spec_, a, &rng_));
      ASSERT_TRUE(wt::WriteAdapter(AdapterDir(i), a, adapters_.back()).ok());
    }
    std::uniform_int_distribution<int32_t> tok(0, spec_.vocab - 1);
    for (int i = 0; i < 10; ++i) {
      std::vector<int32_t> p(9 + i);
      for (int32_t& t : p) t = tok(rng_);
      prompts_.push_back(p);
    }
  }

  std::string AdapterDir(int i) const { return absl::StrCat(root_, "/adapters/a", i); }
  EngineArgs Args() const {
    EngineArgs a;
    a.lora_root = root_ + "/adapters";
    return a;
  }
  void AddAll(AsyncLLMEngine* e) {
    for (int i = 0; i < 4; ++i) {
      absl::StatusOr<LoraInfo> info = e->AddLora({absl::StrCat("a", i), 0, AdapterDir(i)});
      ASSERT_TRUE(info.ok()) << info.status();
      EXPECT_EQ(info->rank, specs_[i].rank);
    }
  }

  uint32_t seed_ = 0;
  std::mt19937 rng_;
  wt::TinySpec spec_;
  std::string root_;
  wt::Weights base_;
  std::vector<wt::AdapterSpec> specs_;
  std::vector<wt::Weights> adapters_;
  std::vector<std::vector<int32_t>> prompts_;
};

TEST_F(LoraEngineTest, GenerateWithAdapterEqualsMergedModel) {
  std::unique_ptr<AsyncLLMEngine> e = MakeEngine(root_ + "/base.gguf", Args());
  ASSERT_TRUE(e);
  AddAll(e.get());
  for (int i = 0; i < 4; ++i) {
    const std::string merged = absl::StrCat(root_, "/merged", i, ".gguf");
    ASSERT_TRUE(wt::WriteGgufModel(merged, spec_, wt::Merge(base_, specs_[i], adapters_[i])).ok());
    std::unique_ptr<AsyncLLMEngine> m = MakeEngine(merged);
    ASSERT_TRUE(m);
    const std::vector<int32_t> want = RunOne(m.get(), prompts_[i], "m");
    EXPECT_EQ(RunOne(e.get(), prompts_[i], absl::StrCat("x", i), absl::StrCat("a", i)), want)
        << "adapter " << i;
  }
}

// The same prompt under the base model and every adapter, one after the
// other: each must equal its own cold run, so no prefix block leaked.
TEST_F(LoraEngineTest, PrefixCacheNeverCrossesAdapters) {
  std::unique_ptr<AsyncLLMEngine> e = MakeEngine(root_ + "/base.gguf", Args());
  ASSERT_TRUE(e);
  AddAll(e.get());
  const std::vector<int32_t>& prompt = prompts_[9];
  std::vector<std::vector<int32_t>> cold;
  for (int i = -1; i < 4; ++i) {
    std::unique_ptr<AsyncLLMEngine> fresh = MakeEngine(root_ + "/base.gguf", Args());
    AddAll(fresh.get());
    cold.push_back(RunOne(fresh.get(), prompt, "c", i < 0 ? "" : absl::StrCat("a", i)));
  }
  for (int round = 0; round < 2; ++round) {
    for (int i = -1; i < 4; ++i) {
      EXPECT_EQ(
          RunOne(e.get(), prompt, absl::StrCat("w", round, i), i < 0 ? "" : absl::StrCat("a", i)),
          cold[i + 1])
          << "round " << round << " adapter " << i;
    }
  }
  EXPECT_NE(cold[0], cold[1]);  // The adapter changes the output.
  // Re-adding a name with other weights must not reuse the old blocks.
  ASSERT_TRUE(e->RemoveLora("a0").ok());
  ASSERT_TRUE(e->AddLora({"a0", 0, AdapterDir(3)}).ok());
  EXPECT_EQ(RunOne(e.get(), prompt, "readd", "a0"), cold[4]);
}

TEST_F(LoraEngineTest, MixedAdaptersConcurrentlyEqualAlone) {
  for (int max_loras : {4, 2}) {
    EngineArgs args = Args();
    args.max_loras = max_loras;
    std::unique_ptr<AsyncLLMEngine> e = MakeEngine(root_ + "/base.gguf", args);
    ASSERT_TRUE(e);
    AddAll(e.get());
    auto lora_of = [](size_t i) { return i % 5 == 4 ? std::string() : absl::StrCat("a", i % 5); };
    std::vector<std::vector<int32_t>> alone;
    for (size_t i = 0; i < prompts_.size(); ++i) {
      alone.push_back(RunOne(e.get(), prompts_[i], absl::StrCat("alone", i), lora_of(i)));
    }
    ASSERT_TRUE(e->ResetPrefixCache().ok());
    std::vector<std::shared_ptr<RequestOutputStream>> streams;
    for (size_t i = 0; i < prompts_.size(); ++i) {
      absl::StatusOr<std::shared_ptr<RequestOutputStream>> s = e->Generate(
          prompts_[i], Greedy(), absl::StrCat("mix", i), 0, absl::InfinitePast(), lora_of(i));
      ASSERT_TRUE(s.ok()) << s.status();
      streams.push_back(*s);
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      EXPECT_EQ(Collect(streams[i]), alone[i])
          << "request " << i << " (lora '" << lora_of(i) << "', max_loras " << max_loras << ")";
    }
  }
}

TEST_F(LoraEngineTest, BadAdaptersFailClearlyAndEngineKeepsServing) {
  std::unique_ptr<AsyncLLMEngine> e = MakeEngine(root_ + "/base.gguf", Args());
  ASSERT_TRUE(e);
  const std::vector<int32_t> base = RunOne(e.get(), prompts_[0], "b0");

  absl::StatusOr<LoraInfo> r = e->AddLora({"missing", 0, root_ + "/adapters/nope"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  r = e->AddLora({"outside", 0, root_ + "/base.gguf"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  EXPECT_NE(r.status().message().find("outside the allowed root"), std::string::npos);
  r = e->AddLora({"dotdot", 0, root_ + "/adapters/../base.gguf"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
  std::filesystem::create_symlink(root_, root_ + "/adapters/escape");
  r = e->AddLora({"symlink", 0, root_ + "/adapters/escape/base.gguf"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();

  wt::AdapterSpec big;
  big.rank = 128;
  ASSERT_TRUE(
      wt::WriteAdapter(root_ + "/adapters/big", big, wt::RandomAdapter(spec_, big, &rng_)).ok());
  r = e->AddLora({"big", 0, root_ + "/adapters/big"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("max_lora_rank"), std::string::npos) << r.status();

  wt::AdapterSpec odd;
  odd.targets = {"q_proj", "embed_tokens"};
  ASSERT_TRUE(wt::WriteAdapter(root_ + "/adapters/odd", odd, {}).ok());
  r = e->AddLora({"odd", 0, root_ + "/adapters/odd"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("embed_tokens"), std::string::npos) << r.status();

  // Shape mismatch: an adapter made for a model with a wider MLP.
  wt::TinySpec wide = spec_;
  wide.ffn *= 2;
  ASSERT_TRUE(wt::WriteAdapter(root_ + "/adapters/wide", specs_[0],
                               wt::RandomAdapter(wide, specs_[0], &rng_))
                  .ok());
  r = e->AddLora({"wide", 0, root_ + "/adapters/wide"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("expected"), std::string::npos) << r.status();

  EXPECT_TRUE(e->ListLoras().empty());
  absl::StatusOr<std::shared_ptr<RequestOutputStream>> g =
      e->Generate(prompts_[0], Greedy(), "unknown", 0, absl::InfinitePast(), "nope");
  EXPECT_EQ(g.status().code(), absl::StatusCode::kNotFound) << g.status();

  ASSERT_TRUE(e->AddLora({"a0", 0, AdapterDir(0)}).ok());
  EXPECT_EQ(e->AddLora({"a0", 0, AdapterDir(1)}).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(e->AddLora({"other", 1, AdapterDir(1)}).status().code(),
            absl::StatusCode::kAlreadyExists);  // id 1 is a0's.
  EXPECT_EQ(e->RemoveLora("nope").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(e->RemoveLora("a0").ok());
  g = e->Generate(prompts_[0], Greedy(), "removed", 0, absl::InfinitePast(), "a0");
  EXPECT_EQ(g.status().code(), absl::StatusCode::kNotFound) << g.status();
  EXPECT_EQ(RunOne(e.get(), prompts_[0], "b1"), base);
  EXPECT_TRUE(e->CheckHealth().ok());
}

TEST_F(LoraEngineTest, NoRootRefusesRuntimeLoadsButStartupAdaptersLoad) {
  EngineArgs args;  // No lora_root.
  args.lora.adapters = {{"boot", AdapterDir(2)}};
  std::unique_ptr<AsyncLLMEngine> e = MakeEngine(root_ + "/base.gguf", args);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->AddLora({"a0", 0, AdapterDir(0)}).status().code(),
            absl::StatusCode::kPermissionDenied);
  std::vector<LoraInfo> list = e->ListLoras();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].name, "boot");
  EXPECT_EQ(list[0].rank, specs_[2].rank);
  EXPECT_FALSE(RunOne(e.get(), prompts_[0], "boot", "boot").empty());

  // A bad start-up adapter fails Create with the flag in the message.
  LocalExecutorOptions o;
  o.model_path = root_ + "/base.gguf";
  o.num_blocks = 16;
  absl::StatusOr<std::unique_ptr<LocalModelExecutor>> ex = LocalModelExecutor::Create(o);
  ASSERT_TRUE(ex.ok());
  EngineArgs bad;
  bad.lora.adapters = {{"x", root_ + "/nowhere"}};
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> failed =
      AsyncLLMEngine::Create(bad, std::move(*ex), nullptr);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("--lora x="), std::string::npos) << failed.status();
}

// A request keeps its adapter when it is removed (or evicted) before the
// request runs: the engine sleeps, so the request is queued, not running.
TEST_F(LoraEngineTest, RemovedAdapterStaysWithItsQueuedRequest) {
  std::unique_ptr<AsyncLLMEngine> e = MakeEngine(root_ + "/base.gguf", Args());
  ASSERT_TRUE(e);
  AddAll(e.get());
  const std::vector<int32_t> want = RunOne(e.get(), prompts_[2], "first", "a1");
  ASSERT_TRUE(e->Sleep(1).ok());
  absl::StatusOr<std::shared_ptr<RequestOutputStream>> s =
      e->Generate(prompts_[2], Greedy(), "queued", 0, absl::InfinitePast(), "a1");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(e->RemoveLora("a1").ok());
  ASSERT_TRUE(e->WakeUp().ok());
  EXPECT_EQ(Collect(*s), want);
}

// One adapter kept in memory: the other is evicted and reloaded on use,
// with the same outputs.
TEST_F(LoraEngineTest, LruEvictsAndReloads) {
  EngineArgs args = Args();
  args.max_loras = 1;
  args.max_cpu_loras = 1;
  std::unique_ptr<AsyncLLMEngine> e = MakeEngine(root_ + "/base.gguf", args);
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->AddLora({"a0", 0, AdapterDir(0)}).ok());
  const std::vector<int32_t> first = RunOne(e.get(), prompts_[1], "p0", "a0");
  ASSERT_TRUE(e->AddLora({"a1", 0, AdapterDir(1)}).ok());
  std::vector<LoraInfo> list = e->ListLoras();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_FALSE(list[0].loaded);  // a0 evicted by a1.
  EXPECT_TRUE(list[1].loaded);
  EXPECT_EQ(RunOne(e.get(), prompts_[1], "p1", "a0"), first);
  list = e->ListLoras();
  EXPECT_TRUE(list[0].loaded);
  EXPECT_FALSE(list[1].loaded);
}

}  // namespace
}  // namespace rill::engine
