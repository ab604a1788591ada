// A sequence's logits must not depend on what else is in the step: alone,
// inside a batch of 32 mixed prefill/decode sequences, or with its prompt
// split into chunks (the engine relies on this for identical outputs).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "kernels/cpu/kernel_plan.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/python_runner.h"
#include "tests/util/test_seed.h"
#include "tests/util/tiny_models.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/causal_lm.h"

namespace rill::worker {
namespace {

constexpr int kBlockSize = 16;
constexpr int kBlocksPerSeq = 8;  // 128 positions per sequence

double MaxRelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / (den + 1e-30));
}

// Block table of sequence slot s, deliberately interleaved across slots.
std::vector<int32_t> Table(int slot, int num_slots) {
  std::vector<int32_t> t;
  for (int i = 0; i < kBlocksPerSeq; ++i) t.push_back(i * num_slots + slot);
  return t;
}

// 32 sequences with random token ids in [token_lo, token_hi]: each one's
// logits alone (own cache, context prefilled in one chunk) must equal its
// logits inside one batch of all 32 (contexts prefilled in 7-token chunks).
void ExpectAloneBatchedAndChunkedAgree(CausalLm* model, int32_t token_lo, int32_t token_hi,
                                       kernels::cpu::KvDtype kv_dtype) {
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(0));
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(token_lo, token_hi);
  std::uniform_int_distribution<int> len(1, 40);
  constexpr int kSeqs = 32;
  // Each sequence has a context already cached (ctx tokens) and brings
  // `n` new ones: n == 1 is a decode, n > 1 a prefill chunk.
  std::vector<std::vector<int32_t>> context(kSeqs), fresh(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    const int ctx = s % 3 == 0 ? 0 : len(rng);
    const int n = s % 2 == 0 ? 1 + len(rng) : 1;
    for (int i = 0; i < ctx; ++i) context[s].push_back(token(rng));
    for (int i = 0; i < n; ++i) fresh[s].push_back(token(rng));
  }
  auto new_cache = [&] {
    absl::StatusOr<PagedKvCache> c =
        PagedKvCache::Create(model->CacheShape(kBlocksPerSeq * kSeqs, kBlockSize, kv_dtype));
    EXPECT_TRUE(c.ok());
    return std::make_unique<PagedKvCache>(std::move(*c));
  };
  // Fills sequence s's context into `cache`, in one chunk or in pieces of `piece`.
  auto prefill_context = [&](PagedKvCache* cache, int s, int piece) {
    for (size_t done = 0; done < context[s].size();) {
      const size_t n = std::min<size_t>(piece, context[s].size() - done);
      ForwardBatch b;
      b.sequences.push_back({std::vector<int32_t>(context[s].begin() + done,
                                                  context[s].begin() + done + n),
                             static_cast<int32_t>(done), Table(s, kSeqs), false});
      ForwardOutput o;
      ASSERT_TRUE(model->Forward(b, cache, &o).ok());
      done += n;
    }
  };

  // Alone: each sequence in its own cache and step.
  std::vector<std::vector<float>> alone(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    auto cache = new_cache();
    prefill_context(cache.get(), s, 1000);
    ForwardBatch b;
    b.sequences.push_back({fresh[s], static_cast<int32_t>(context[s].size()), Table(s, kSeqs),
                           true});
    ForwardOutput o;
    ASSERT_TRUE(model->Forward(b, cache.get(), &o).ok());
    alone[s] = o.logits[0];
  }

  // Batched: contexts written in 7-token chunks, then all 32 in one step.
  auto cache = new_cache();
  for (int s = 0; s < kSeqs; ++s) prefill_context(cache.get(), s, 7);
  ForwardBatch batch;
  for (int s = 0; s < kSeqs; ++s) {
    batch.sequences.push_back({fresh[s], static_cast<int32_t>(context[s].size()), Table(s, kSeqs),
                               true});
  }
  ForwardOutput out;
  ASSERT_TRUE(model->Forward(batch, cache.get(), &out).ok());
  for (int s = 0; s < kSeqs; ++s) {
    EXPECT_LE(MaxRelDiff(out.logits[s], alone[s]), 1e-5)
        << "sequence " << s << " (context " << context[s].size() << ", new " << fresh[s].size()
        << ")";
  }
}

// The matmul paths: "Fast" (q8 activations), "Exact" (f32 activations),
// "Int16" (exact with the packed int16 VNNI kernels, where the CPU has them),
// and "ExactF16Kv" (exact, with an f16 KV cache).
enum class Path { kFast, kExact, kInt16, kExactF16Kv };

class BatchInvarianceTest : public ::testing::TestWithParam<Path> {
 protected:
  void SetUp() override {
    const std::string path = rill::tests::util::DefaultModelPath();
    ASSERT_EQ(access(path.c_str(), R_OK), 0) << "default model missing: run tools/setup.sh";
    absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
        worker::loader::LoadCheckpoint(path);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    pool_ = std::make_unique<kernels::cpu::ThreadPool>(0);
    kernels::cpu::KernelPlanOptions plan_options;
    plan_options.matmul = GetParam() == Path::kFast    ? "q8"
                          : GetParam() == Path::kInt16 ? "int16"
                                                       : "exact";
    absl::StatusOr<kernels::cpu::KernelPlan> plan = kernels::cpu::ChooseKernelPlan(plan_options);
    if (absl::IsFailedPrecondition(plan.status())) GTEST_SKIP() << plan.status();
    ASSERT_TRUE(plan.ok()) << plan.status();
    absl::StatusOr<std::unique_ptr<CausalLm>> model =
        CreateCausalLm(std::move(*ckpt), pool_.get(), ModelOptions{.kernel_plan = *plan});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
  }

  std::unique_ptr<kernels::cpu::ThreadPool> pool_;
  std::unique_ptr<CausalLm> model_;
};

TEST_P(BatchInvarianceTest, AloneBatchedAndChunkedAgree) {
  ExpectAloneBatchedAndChunkedAgree(
      model_.get(), 100, 49000,
      GetParam() == Path::kExactF16Kv ? kernels::cpu::KvDtype::kF16 : kernels::cpu::KvDtype::kF32);
}

INSTANTIATE_TEST_SUITE_P(MatmulPaths, BatchInvarianceTest,
                         ::testing::Values(Path::kExact, Path::kFast, Path::kInt16,
                                           Path::kExactF16Kv),
                         [](const ::testing::TestParamInfo<Path>& i) {
                           return i.param == Path::kExact    ? "Exact"
                                  : i.param == Path::kFast   ? "Fast"
                                  : i.param == Path::kInt16  ? "Int16"
                                                             : "ExactF16Kv";
                         });

// The families of issue 32 on their tiny random models (windows of 8,
// shorter than most contexts here; Gemma 3's per-layer RoPE; Phi-3's split
// fused projections, LongRoPE and partial rotary).
class TinyFamilyBatchInvarianceTest
    : public rill::tests::util::TinyModels<::testing::TestWithParam<std::string>> {};

TEST_P(TinyFamilyBatchInvarianceTest, AloneBatchedAndChunkedAgree) {
  std::cout << "tiny model seed " << seed_ << "\n";
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
      worker::loader::LoadCheckpoint(absl::StrCat(dir_, "/", GetParam()));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  kernels::cpu::ThreadPool pool(0);
  absl::StatusOr<std::unique_ptr<CausalLm>> model = CreateCausalLm(std::move(*ckpt), &pool);
  ASSERT_TRUE(model.ok()) << model.status();
  ExpectAloneBatchedAndChunkedAgree(model->get(), 0, 299, kernels::cpu::KvDtype::kF32);
}

INSTANTIATE_TEST_SUITE_P(NewFamilies, TinyFamilyBatchInvarianceTest,
                         ::testing::Values("gemma3/hf-f32", "gemma3/model.q8_0.gguf",
                                           "gemma3_tf5/hf-f32", "phi3/model.q8_0.gguf",
                                           "phi3_longrope/hf-f32"),
                         rill::tests::util::TinyModelTestName);

// An f16 KV cache changes only how K/V are stored: on the real model the
// logits stay close to the f32 cache's (rounding K/V to 11 bits moves them
// by ~1e-3 relative on average, up to ~1.3e-2 at the first positions) and
// greedy decoding mostly picks the same tokens, while the cache takes half
// the bytes.
TEST(F16KvCacheTest, LogitsStayCloseToTheF32Cache) {
  const std::string path = rill::tests::util::DefaultModelPath();
  ASSERT_EQ(access(path.c_str(), R_OK), 0) << "default model missing: run tools/setup.sh";
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
      worker::loader::LoadCheckpoint(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  kernels::cpu::ThreadPool pool(0);
  absl::StatusOr<std::unique_ptr<CausalLm>> model =
      CreateCausalLm(std::move(*ckpt), &pool, ModelOptions{});
  ASSERT_TRUE(model.ok()) << model.status();
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(1));
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(100, 49000);
  std::vector<int32_t> prompt(64);
  for (int32_t& t : prompt) t = token(rng);
  std::vector<int32_t> table(kBlocksPerSeq);
  for (int i = 0; i < kBlocksPerSeq; ++i) table[i] = i;
  absl::StatusOr<PagedKvCache> c32 = PagedKvCache::Create(
      (*model)->CacheShape(kBlocksPerSeq, kBlockSize, kernels::cpu::KvDtype::kF32));
  absl::StatusOr<PagedKvCache> c16 = PagedKvCache::Create(
      (*model)->CacheShape(kBlocksPerSeq, kBlockSize, kernels::cpu::KvDtype::kF16));
  ASSERT_TRUE(c32.ok() && c16.ok());
  EXPECT_EQ(c16->bytes() * 2, c32->bytes());
  EXPECT_EQ(c16->shape().block_bytes() * 2, c32->shape().block_bytes());
  // Prefill with every position's logits, then greedy decode on the f32
  // cache's tokens (so both see the same context).
  ForwardBatch b;
  b.sequences.push_back({prompt, 0, table, true});
  ForwardOutput o32, o16;
  ASSERT_TRUE((*model)->Forward(b, &*c32, &o32).ok());
  ASSERT_TRUE((*model)->Forward(b, &*c16, &o16).ok());
  const int64_t vocab = (*model)->config().vocab_size;
  std::vector<double> diffs;  // per prompt position
  for (size_t p = 1; p < prompt.size(); ++p) {  // position 0 sees only itself: identical
    std::vector<float> a(o16.logits[0].begin() + p * vocab, o16.logits[0].begin() + (p + 1) * vocab);
    std::vector<float> r(o32.logits[0].begin() + p * vocab, o32.logits[0].begin() + (p + 1) * vocab);
    diffs.push_back(MaxRelDiff(a, r));
  }
  std::vector<double> sorted = diffs;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2], p90 = sorted[sorted.size() * 9 / 10];
  double worst = sorted.back();
  std::cout << "\nprefill: relative L2 difference median " << median << ", 90th percentile " << p90
            << ", worst " << worst << " at position "
            << 1 + (std::max_element(diffs.begin(), diffs.end()) - diffs.begin()) << "\n";
  EXPECT_GT(worst, 0.0) << "the f16 cache should round something";
  EXPECT_TRUE(std::isfinite(worst));
  // Typical positions move by ~1e-4. A few of a random prompt can move far
  // more: a query whose scores are large and close turns the halves'
  // rounding of K into a different softmax (seen: 0.23 at position 10 of
  // RILL_TEST_SEED=3407565992, with the f32 cache's greedy token unchanged
  // downstream), so the bounds are on the bulk, not the worst position.
  EXPECT_LT(median, 1e-3);
  EXPECT_LT(p90, 1e-2);
  worst = 0.0;
  auto argmax = [](const std::vector<float>& v, size_t off, size_t n) {
    size_t best = off;
    for (size_t i = off; i < off + n; ++i) best = v[i] > v[best] ? i : best;
    return static_cast<int32_t>(best - off);
  };
  int32_t next = argmax(o32.logits[0], (prompt.size() - 1) * vocab, vocab);
  int same = 0;
  const int steps = 32;
  for (int i = 0; i < steps; ++i) {
    ForwardBatch d;
    d.sequences.push_back({{next}, static_cast<int32_t>(prompt.size() + i), table, false});
    ForwardOutput d32, d16;
    ASSERT_TRUE((*model)->Forward(d, &*c32, &d32).ok());
    ASSERT_TRUE((*model)->Forward(d, &*c16, &d16).ok());
    worst = std::max(worst, MaxRelDiff(d16.logits[0], d32.logits[0]));
    const int32_t t32 = argmax(d32.logits[0], 0, vocab), t16 = argmax(d16.logits[0], 0, vocab);
    same += t32 == t16;
    next = t32;
  }
  std::cout << "decode: worst relative L2 difference " << worst << ", same greedy token " << same
            << "/" << steps << "\n";
  EXPECT_LT(worst, 1e-2);  // decode positions 64+ see many keys
  EXPECT_GE(same, steps * 9 / 10);
}

TEST(ForwardValidationTest, RejectsBadBatchesWithClearErrors) {
  const std::string path = rill::tests::util::DefaultModelPath();
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
      worker::loader::LoadCheckpoint(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  kernels::cpu::ThreadPool pool(1);
  absl::StatusOr<std::unique_ptr<CausalLm>> model = CreateCausalLm(std::move(*ckpt), &pool);
  ASSERT_TRUE(model.ok());
  absl::StatusOr<PagedKvCache> cache = PagedKvCache::Create((*model)->CacheShape(4, kBlockSize));
  ASSERT_TRUE(cache.ok());
  ForwardOutput out;
  auto run = [&](SequenceChunk seq) {
    ForwardBatch b;
    b.sequences.push_back(std::move(seq));
    return (*model)->Forward(b, &*cache, &out);
  };
  absl::Status s = run({{49152}, 0, {0}, false});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("outside the vocabulary"), std::string::npos) << s;
  s = run({std::vector<int32_t>(20, 5), 0, {0}, false});
  EXPECT_NE(s.message().find("block table"), std::string::npos) << s;
  s = run({{5}, 0, {7}, false});
  EXPECT_NE(s.message().find("outside the cache"), std::string::npos) << s;
  s = run({{}, 0, {0}, false});
  EXPECT_NE(s.message().find("no new tokens"), std::string::npos) << s;
  s = run({{5}, 9000, std::vector<int32_t>(600, 0), false});
  EXPECT_NE(s.message().find("context length"), std::string::npos) << s;
}

}  // namespace
}  // namespace rill::worker
