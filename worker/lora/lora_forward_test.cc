// LoRA through the real forward pass: a model run with adapter X equals the
// model whose weights were merged with X offline (W + scale B A, built here),
// and a batch that mixes four adapters and the base model gives every
// sequence exactly what it gets alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/python_runner.h"
#include "tests/util/test_seed.h"
#include "worker/loader/checkpoint.h"
#include "worker/lora/lora_adapter.h"
#include "worker/lora/lora_test_util.h"
#include "worker/models/causal_lm.h"

namespace rill::worker {
namespace {

using testing::AdapterSpec;
using testing::TinySpec;

double RelL2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / (den + 1e-30));
}

std::unique_ptr<CausalLm> LoadModel(const std::string& path, kernels::cpu::ThreadPool* pool) {
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
      worker::loader::LoadCheckpoint(path);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  if (!ckpt.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<CausalLm>> m =
      CreateCausalLm(std::shared_ptr<const worker::loader::Checkpoint>(std::move(*ckpt)), pool);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

struct GenRun {
  std::vector<float> logits;  // Every prompt position.
  std::vector<int32_t> greedy;
};

GenRun Generate(CausalLm* model, const std::vector<int32_t>& prompt, int steps,
                std::shared_ptr<const LoraAdapter> lora) {
  const int bs = 16, blocks = (prompt.size() + steps) / bs + 2;
  absl::StatusOr<PagedKvCache> cache = PagedKvCache::Create(model->CacheShape(blocks, bs));
  EXPECT_TRUE(cache.ok());
  ForwardBatch batch;
  SequenceChunk& seq = batch.sequences.emplace_back();
  for (int i = 0; i < blocks; ++i) seq.block_table.push_back(blocks - 1 - i);
  seq.tokens = prompt;
  seq.all_logits = true;
  seq.lora = std::move(lora);
  const int64_t vocab = model->config().vocab_size;
  GenRun run;
  for (int s = 0; s <= steps; ++s) {
    ForwardOutput out;
    absl::Status st = model->Forward(batch, &*cache, &out);
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok()) return run;
    if (s == 0) run.logits = out.logits[0];
    if (s == steps) break;
    const float* last = out.logits[0].data() + out.logits[0].size() - vocab;
    const int32_t next = static_cast<int32_t>(std::max_element(last, last + vocab) - last);
    run.greedy.push_back(next);
    seq.start_pos += seq.tokens.size();
    seq.tokens = {next};
    seq.all_logits = false;
  }
  return run;
}

struct MergeCase {
  std::string name;
  TinySpec spec;
  AdapterSpec adapter;
};

void PrintTo(const MergeCase& c, std::ostream* os) { *os << c.name; }

class MergedEquivalenceTest : public ::testing::TestWithParam<MergeCase> {};

TEST_P(MergedEquivalenceTest, AdapterEqualsOfflineMergedWeights) {
  const MergeCase& c = GetParam();
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(0));
  std::cout << c.name << " seed " << seed << "\n";
  std::mt19937 rng(seed);
  const std::string dir = absl::StrCat(testing::TempDir(), "/merge_", c.name);
  testing::Weights base = testing::RandomModel(c.spec, &rng);
  testing::Weights adapter = testing::RandomAdapter(c.spec, c.adapter, &rng);
  ASSERT_TRUE(testing::WriteGgufModel(dir + "/base.gguf", c.spec, base).ok());
  ASSERT_TRUE(testing::WriteGgufModel(dir + "/merged.gguf", c.spec,
                                      testing::Merge(base, c.adapter, adapter))
                  .ok());
  ASSERT_TRUE(testing::WriteAdapter(dir + "/adapter", c.adapter, adapter).ok());

  kernels::cpu::ThreadPool pool(0);
  std::unique_ptr<CausalLm> model = LoadModel(dir + "/base.gguf", &pool);
  std::unique_ptr<CausalLm> merged = LoadModel(dir + "/merged.gguf", &pool);
  ASSERT_TRUE(model && merged);
  absl::StatusOr<std::shared_ptr<const LoraAdapter>> lora =
      LoadLoraAdapter(dir + "/adapter", model->config());
  ASSERT_TRUE(lora.ok()) << lora.status();
  EXPECT_FLOAT_EQ((*lora)->scale, testing::AdapterScale(c.adapter));

  std::uniform_int_distribution<int32_t> tok(0, c.spec.vocab - 1);
  std::vector<int32_t> prompt(20);
  for (int32_t& t : prompt) t = tok(rng);
  const GenRun with_adapter = Generate(model.get(), prompt, 12, *lora);
  const GenRun reference = Generate(merged.get(), prompt, 12, nullptr);
  const GenRun plain = Generate(model.get(), prompt, 12, nullptr);
  ASSERT_EQ(with_adapter.logits.size(), reference.logits.size());
  EXPECT_LT(RelL2(with_adapter.logits, reference.logits), 1e-4);
  EXPECT_EQ(with_adapter.greedy, reference.greedy);
  // The adapter must matter, or the comparison proves nothing.
  EXPECT_GT(RelL2(plain.logits, reference.logits), 1e-2);
}

AdapterSpec Targets(std::vector<std::string> t, int rank, double alpha, bool rslora = false) {
  AdapterSpec a;
  a.targets = std::move(t);
  a.rank = rank;
  a.alpha = alpha;
  a.use_rslora = rslora;
  return a;
}

TinySpec Qwen2Tiny() {
  TinySpec s;
  s.arch = "qwen2";
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Models, MergedEquivalenceTest,
    ::testing::Values(MergeCase{"tiny_llama_all", TinySpec{}, AdapterSpec{}},
                      MergeCase{"tiny_llama_qv_rslora", TinySpec{},
                                Targets({"q_proj", "v_proj"}, 8, 16, true)},
                      MergeCase{"tiny_qwen2_attn", Qwen2Tiny(),
                                Targets({"q_proj", "k_proj", "v_proj", "o_proj"}, 2, 4)},
                      MergeCase{"default_architecture", testing::DefaultArchitectureSpec(),
                                Targets({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                         "up_proj", "down_proj"},
                                        8, 16)}),
    [](const ::testing::TestParamInfo<MergeCase>& i) { return i.param.name; });

// The real default model (quantized weights) with a random adapter against
// the same file with the targeted projections replaced by f32 W + scale B A.
TEST(DefaultModelLoraTest, AdapterEqualsOfflineMergedWeights) {
  const std::string path = rill::tests::util::DefaultModelPath();
  if (access(path.c_str(), R_OK) != 0) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(1));
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  kernels::cpu::ThreadPool pool(0);
  std::unique_ptr<CausalLm> model = LoadModel(path, &pool);
  ASSERT_TRUE(model);
  const TinySpec spec = testing::SpecOfModel(model->config());
  const AdapterSpec a = Targets({"q_proj", "k_proj", "v_proj"}, 8, 16);
  const testing::Weights adapter = testing::RandomAdapter(spec, a, &rng);
  const std::string dir = testing::TempDir() + "/default_lora";
  ASSERT_TRUE(testing::WriteAdapter(dir + "/adapter", a, adapter).ok());
  const absl::Status merged_written =
      testing::WriteMergedGguf(path, dir + "/merged.gguf", a, adapter);
  ASSERT_TRUE(merged_written.ok()) << merged_written;
  std::unique_ptr<CausalLm> merged = LoadModel(dir + "/merged.gguf", &pool);
  ASSERT_TRUE(merged);
  absl::StatusOr<std::shared_ptr<const LoraAdapter>> lora = LoadLoraAdapter(dir + "/adapter", model->config());
  ASSERT_TRUE(lora.ok()) << lora.status();
  // "The capital of France is" and a continuation.
  const std::vector<int32_t> prompt = {504, 3575, 282, 4649, 314};
  absl::Time t0 = absl::Now();
  const GenRun with_adapter = Generate(model.get(), prompt, 16, *lora);
  absl::Time t1 = absl::Now();
  const GenRun plain = Generate(model.get(), prompt, 16, nullptr);
  absl::Time t2 = absl::Now();
  std::cout << "17 forwards: with adapter (rank 8, q/k/v) " << absl::FormatDuration(t1 - t0)
            << ", base " << absl::FormatDuration(t2 - t1) << "\n";
  const GenRun reference = Generate(merged.get(), prompt, 16, nullptr);
  EXPECT_LT(RelL2(with_adapter.logits, reference.logits), 1e-4);
  EXPECT_EQ(with_adapter.greedy, reference.greedy);
  EXPECT_GT(RelL2(plain.logits, reference.logits), 1e-2);
}

// Four adapters and the base model in one step, each sequence with cached
// context and new tokens, against each sequence alone. More than 256 tokens
// in the step, so the MLP's token slices cut through sequences.
TEST(MixedLoraBatchTest, EverySequenceGetsWhatItGetsAlone) {
  const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(2));
  std::cout << "seed " << seed << "\n";
  std::mt19937 rng(seed);
  const TinySpec spec = testing::DefaultArchitectureSpec(2, 1024);
  const std::string dir = absl::StrCat(testing::TempDir(), "/mixed");
  ASSERT_TRUE(
      testing::WriteGgufModel(dir + "/base.gguf", spec, testing::RandomModel(spec, &rng)).ok());
  kernels::cpu::ThreadPool pool(0);
  std::unique_ptr<CausalLm> model = LoadModel(dir + "/base.gguf", &pool);
  ASSERT_TRUE(model);
  const std::vector<AdapterSpec> specs = {AdapterSpec{}, Targets({"q_proj", "v_proj"}, 8, 16),
                                          Targets({"down_proj"}, 2, 2, true),
                                          Targets({"o_proj", "gate_proj", "up_proj"}, 16, 8)};
  std::vector<std::shared_ptr<const LoraAdapter>> adapters;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string a = absl::StrCat(dir, "/adapter", i);
    ASSERT_TRUE(
        testing::WriteAdapter(a, specs[i], testing::RandomAdapter(spec, specs[i], &rng)).ok());
    absl::StatusOr<std::shared_ptr<const LoraAdapter>> l = LoadLoraAdapter(a, model->config());
    ASSERT_TRUE(l.ok()) << l.status();
    adapters.push_back(*l);
  }
  adapters.push_back(nullptr);  // The base model.

  constexpr int kSeqs = 15, kBlocksPerSeq = 8, kBs = 16;
  std::uniform_int_distribution<int32_t> tok(0, spec.vocab - 1);
  std::uniform_int_distribution<int> len(1, 40);
  std::vector<std::vector<int32_t>> context(kSeqs), fresh(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    const int ctx = s % 3 == 0 ? 0 : len(rng);
    const int n = s % 2 == 0 ? 33 + len(rng) : 1;  // >= 8 * 34 tokens in all
    for (int i = 0; i < ctx; ++i) context[s].push_back(tok(rng));
    for (int i = 0; i < n; ++i) fresh[s].push_back(tok(rng));
  }
  auto lora_of = [&](int s) { return adapters[s % adapters.size()]; };
  auto table = [&](int s) {
    std::vector<int32_t> t;
    for (int i = 0; i < kBlocksPerSeq; ++i) t.push_back(i * kSeqs + s);
    return t;
  };
  auto new_cache = [&] {
    absl::StatusOr<PagedKvCache> c =
        PagedKvCache::Create(model->CacheShape(kBlocksPerSeq * kSeqs, kBs));
    EXPECT_TRUE(c.ok());
    return std::make_unique<PagedKvCache>(std::move(*c));
  };
  auto prefill = [&](PagedKvCache* cache, int s, size_t piece) {
    for (size_t done = 0; done < context[s].size();) {
      const size_t n = std::min(piece, context[s].size() - done);
      ForwardBatch b;
      SequenceChunk& q = b.sequences.emplace_back();
      q.tokens.assign(context[s].begin() + done, context[s].begin() + done + n);
      q.start_pos = done;
      q.block_table = table(s);
      q.lora = lora_of(s);
      ForwardOutput o;
      ASSERT_TRUE(model->Forward(b, cache, &o).ok());
      done += n;
    }
  };
  auto chunk = [&](int s) {
    SequenceChunk q;
    q.tokens = fresh[s];
    q.start_pos = context[s].size();
    q.block_table = table(s);
    q.all_logits = true;
    q.lora = lora_of(s);
    return q;
  };

  std::vector<std::vector<float>> alone(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    auto cache = new_cache();
    prefill(cache.get(), s, 1000);
    ForwardBatch b;
    b.sequences.push_back(chunk(s));
    ForwardOutput o;
    ASSERT_TRUE(model->Forward(b, cache.get(), &o).ok());
    alone[s] = o.logits[0];
  }
  auto cache = new_cache();
  for (int s = 0; s < kSeqs; ++s) prefill(cache.get(), s, 7);
  ForwardBatch batch;
  int64_t total = 0;
  for (int s = 0; s < kSeqs; ++s) {
    batch.sequences.push_back(chunk(s));
    total += fresh[s].size();
  }
  ASSERT_GT(total, 256);
  ForwardOutput out;
  ASSERT_TRUE(model->Forward(batch, cache.get(), &out).ok());
  for (int s = 0; s < kSeqs; ++s) {
    EXPECT_EQ(out.logits[s], alone[s])
        << "sequence " << s << " (adapter " << s % adapters.size() << ", context "
        << context[s].size() << ", new " << fresh[s].size() << ")";
  }
  // And the adapters do change the output (sequence 0 has adapter 0 vs base).
  ForwardBatch base_only;
  base_only.sequences.push_back(chunk(0));
  base_only.sequences[0].lora = nullptr;
  auto c2 = new_cache();
  ForwardOutput o2;
  ASSERT_TRUE(model->Forward(base_only, c2.get(), &o2).ok());
  EXPECT_GT(RelL2(o2.logits[0], alone[0]), 1e-3);
}

}  // namespace
}  // namespace rill::worker
