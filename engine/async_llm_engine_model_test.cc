// AsyncLLMEngine with the real default model: greedy outputs must not depend
// on batching, prefix-cache hits or preemption. Skips when the model is absent.

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/model_dir.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/model_path.h"
#include "engine/stream_drain.h"

namespace rill::engine {
namespace {

constexpr int kTokens = 16;

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = kTokens;
  p.ignore_eos = true;
  return p;
}

RequestOutput RunOne(AsyncLLMEngine* engine, const std::string& prompt, const std::string& id) {
  auto stream = engine->Generate(prompt, Greedy(), id);
  EXPECT_TRUE(stream.ok()) << stream.status();
  if (!stream.ok()) return {};
  RequestOutput last = engine::testing::LastOutput(**stream, absl::Seconds(120));
  EXPECT_TRUE(last.finished) << id;
  return last;
}

std::vector<RequestOutput> RunConcurrently(AsyncLLMEngine* engine,
                                           const std::vector<std::string>& prompts,
                                           const std::string& prefix) {
  std::vector<std::shared_ptr<RequestOutputStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto s = engine->Generate(prompts[i], Greedy(), absl::StrCat(prefix, i));
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
  }
  return outs;
}

std::vector<std::string> Prompts(int n) {
  const char* topics[] = {"the ocean", "mountains", "a small robot", "coffee", "the moon",
                          "trains", "libraries", "winter", "a lost key", "bees",
                          "volcanoes", "chess", "rain", "a lighthouse", "bread", "music"};
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(absl::StrCat("Write one sentence about ", topics[i % 16], "."));
  return out;
}

class ModelEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!base::DefaultModelFileExists()) return;
    EngineArgs args;
    args.kv_cache_mb = 256;
    args.max_model_len = 512;
    args.max_num_seqs = 16;
    args.max_num_batched_tokens = 256;
    auto e = CreateAsyncLLMEngine(args);
    CHECK(e.ok()) << e.status();
    engine_ = e->release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  void SetUp() override {
    if (engine_ == nullptr) GTEST_SKIP() << "default model not found at " << ResolveModelPath("default");
  }
  static AsyncLLMEngine* engine_;
};
AsyncLLMEngine* ModelEngineTest::engine_ = nullptr;

TEST_F(ModelEngineTest, AloneEqualsAmong16Concurrent) {
  const std::vector<std::string> prompts = Prompts(16);
  ASSERT_TRUE(engine_->ResetPrefixCache().ok());
  const RequestOutput alone = RunOne(engine_, prompts[3], "alone");
  ASSERT_EQ(alone.outputs[0].token_ids.size(), static_cast<size_t>(kTokens));
  ASSERT_TRUE(engine_->ResetPrefixCache().ok());
  const std::vector<RequestOutput> batch = RunConcurrently(engine_, prompts, "batch");
  ASSERT_EQ(batch.size(), 16u);
  EXPECT_EQ(batch[3].outputs[0].token_ids, alone.outputs[0].token_ids)
      << "alone: " << alone.outputs[0].text << "\nbatched: " << batch[3].outputs[0].text;
  EXPECT_EQ(batch[3].outputs[0].text, alone.outputs[0].text);
  EXPECT_FALSE(alone.outputs[0].text.empty());
  LOG(INFO) << "alone: " << prompts[3] << " -> " << alone.outputs[0].text;
  engine_->DoLogStats();
}

TEST_F(ModelEngineTest, PrefixCacheHitGivesSameOutput) {
  ASSERT_TRUE(engine_->ResetPrefixCache().ok());
  const std::string prompt =
      "You are a helpful assistant. Answer briefly and clearly. Question: what is the "
      "capital city of France, and what river flows through it?";
  const RequestOutput cold = RunOne(engine_, prompt, "cold");
  EXPECT_EQ(cold.metrics.num_cached_tokens, 0);
  const RequestOutput warm = RunOne(engine_, prompt, "warm");
  EXPECT_GE(warm.metrics.num_cached_tokens, 16);
  EXPECT_EQ(warm.outputs[0].token_ids, cold.outputs[0].token_ids)
      << "cold: " << cold.outputs[0].text << "\nwarm: " << warm.outputs[0].text;
}

TEST_F(ModelEngineTest, PreemptedEqualsUnpreempted) {
  const std::vector<std::string> prompts = Prompts(6);
  std::vector<RequestOutput> reference;
  for (size_t i = 0; i < prompts.size(); ++i) {
    reference.push_back(RunOne(engine_, prompts[i], absl::StrCat("ref", i)));
  }
  // A second engine over a cache too small for all six at once:
  // each needs 2 blocks of 16 at the end, 8 blocks hold four.
  EngineArgs args;
  args.num_kv_blocks = 8;
  args.max_model_len = 512;
  args.max_num_seqs = 16;
  args.enable_prefix_caching = false;
  auto small = CreateAsyncLLMEngine(args);
  ASSERT_TRUE(small.ok()) << small.status();
  const std::vector<RequestOutput> outs = RunConcurrently(small->get(), prompts, "small");
  int preemptions = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    preemptions += outs[i].metrics.num_preemptions;
    EXPECT_EQ(outs[i].outputs[0].token_ids, reference[i].outputs[0].token_ids) << i;
  }
  EXPECT_GT(preemptions, 0);
}

// kv_cache_dtype "float16": the same byte budget holds twice the blocks,
// the config says what is stored, greedy output matches the f32 cache's on
// a short answer, and a batch on the f16 cache equals each request alone.
// An unknown dtype fails Create with InvalidArgument naming the choices.
TEST(KvCacheDtypeTest, Float16CacheHoldsTwiceTheBlocksAndServes) {
  if (!base::DefaultModelFileExists()) GTEST_SKIP() << "default model not found";
  EngineArgs args;
  args.kv_cache_mb = 64;
  args.max_model_len = 512;
  args.max_num_seqs = 8;
  args.max_num_batched_tokens = 256;
  args.kv_cache_dtype = "bfloat8";
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> bad = CreateAsyncLLMEngine(args);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("float16"), std::string::npos) << bad.status();

  args.kv_cache_dtype = "auto";
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> f32 = CreateAsyncLLMEngine(args);
  ASSERT_TRUE(f32.ok()) << f32.status();
  args.kv_cache_dtype = "float16";
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> f16 = CreateAsyncLLMEngine(args);
  ASSERT_TRUE(f16.ok()) << f16.status();
  const EngineConfig& c32 = (*f32)->GetEngineConfig();
  const EngineConfig& c16 = (*f16)->GetEngineConfig();
  EXPECT_EQ(c32.cache.kv_cache_dtype, "float32");
  EXPECT_EQ(c16.cache.kv_cache_dtype, "float16");
  EXPECT_EQ(c16.cache.num_blocks, 2 * c32.cache.num_blocks);

  const std::vector<std::string> prompts = Prompts(6);
  const RequestOutput ref = RunOne(f32->get(), prompts[1], "f32");
  const RequestOutput alone = RunOne(f16->get(), prompts[1], "f16-alone");
  ASSERT_EQ(alone.outputs[0].token_ids.size(), static_cast<size_t>(kTokens));
  EXPECT_EQ(alone.outputs[0].token_ids, ref.outputs[0].token_ids)
      << "f32: " << ref.outputs[0].text << "\nf16: " << alone.outputs[0].text;
  ASSERT_TRUE((*f16)->ResetPrefixCache().ok());
  const std::vector<RequestOutput> batch = RunConcurrently(f16->get(), prompts, "f16-batch");
  ASSERT_EQ(batch.size(), prompts.size());
  EXPECT_EQ(batch[1].outputs[0].token_ids, alone.outputs[0].token_ids);
}

}  // namespace
}  // namespace rill::engine
