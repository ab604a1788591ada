// BERT from a GGUF laid out as llama.cpp's converter writes it
// (tests/reference/bert_gguf.py on all-MiniLM-L6-v2: llama.cpp's tensor
// names and metadata keys from the `gguf` package): the same config and
// pooling as the sentence-transformers directory, the same embeddings (F32
// weights equal to the directory's, F16 and Q8_0 within their rounding),
// and the pooling_type key honoured or refused.
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/model_dir.h"
#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/python_runner.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/encoder.h"
#include "worker/pooling.h"

namespace rill::worker {
namespace {

using loader::Checkpoint;
using loader::ModelConfig;

// Writes the GGUF of the default embedding model and returns its path.
std::string Convert(const std::string& outtype, const std::vector<std::string>& extra = {}) {
  const std::string out = absl::StrCat(std::getenv("TEST_TMPDIR"), "/minilm-", outtype,
                                       extra.empty() ? "" : "-" + extra.back(), ".gguf");
  std::vector<std::string> args = {base::DefaultEmbedModelPath(), out, "--outtype", outtype};
  args.insert(args.end(), extra.begin(), extra.end());
  absl::StatusOr<tests::util::CommandResult> r =
      tests::util::RunPython("tests/reference/bert_gguf.py", args);
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->output;
  return out;
}

std::shared_ptr<const Checkpoint> Load(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = loader::LoadCheckpoint(path);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::shared_ptr<const Checkpoint>(std::move(*c)) : nullptr;
}

// Mean-pooled, normalized embeddings of a few sentences' token ids (BERT
// WordPiece ids of all-MiniLM's vocabulary, [CLS] ... [SEP]).
std::vector<std::vector<float>> Embed(const std::shared_ptr<const Checkpoint>& c,
                                      kernels::cpu::ThreadPool* pool) {
  absl::StatusOr<std::unique_ptr<Encoder>> enc = CreateEncoder(c, pool);
  EXPECT_TRUE(enc.ok()) << enc.status();
  if (!enc.ok()) return {};
  const std::vector<std::vector<int32_t>> sentences = {
      {101, 1037, 2158, 2003, 5983, 2833, 1012, 102},                     // A man is eating food.
      {101, 1037, 2158, 2003, 5983, 1037, 3538, 1997, 7852, 1012, 102},  // ... a piece of bread.
      {101, 7592, 2088, 102},
      {101, 102}};
  std::vector<std::vector<float>> out;
  for (const std::vector<int32_t>& ids : sentences) {
    std::vector<std::vector<float>> hidden;
    EXPECT_TRUE((*enc)->Encode({EncoderInput{ids, {}}}, &hidden).ok());
    absl::StatusOr<std::vector<float>> e =
        Pool(hidden[0].data(), ids.size(), c->config().hidden_size, PoolingSpec{});
    EXPECT_TRUE(e.ok()) << e.status();
    out.push_back(*e);
  }
  return out;
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += double(a[i]) * b[i];
    na += double(a[i]) * a[i];
    nb += double(b[i]) * b[i];
  }
  return d / std::sqrt(na * nb);
}

TEST(BertGgufTest, SameModelAsTheSentenceTransformersDirectory) {
  kernels::cpu::ThreadPool pool(0);
  std::shared_ptr<const Checkpoint> dir = Load(base::DefaultEmbedModelPath());
  ASSERT_NE(dir, nullptr);
  EXPECT_EQ(dir->config().pooling, ModelConfig::Pooling::kMean);  // its 1_Pooling module
  const std::vector<std::vector<float>> want = Embed(dir, &pool);
  ASSERT_EQ(want.size(), 4u);
  // sentence-transformers' published similarity of the first two.
  EXPECT_NEAR(Cosine(want[0], want[1]), 0.7553, 2e-3);

  for (const auto& [outtype, min_cosine] :
       std::vector<std::pair<std::string, double>>{{"f32", 1.0 - 1e-9}, {"f16", 0.99999},
                                                   {"q8_0", 0.999}}) {
    std::shared_ptr<const Checkpoint> gguf = Load(Convert(outtype));
    ASSERT_NE(gguf, nullptr) << outtype;
    const ModelConfig& g = gguf->config();
    const ModelConfig& d = dir->config();
    EXPECT_EQ(g.architecture, "bert");
    EXPECT_EQ(g.vocab_size, d.vocab_size);
    EXPECT_EQ(g.hidden_size, d.hidden_size);
    EXPECT_EQ(g.num_layers, d.num_layers);
    EXPECT_EQ(g.num_heads, d.num_heads);
    EXPECT_EQ(g.intermediate_size, d.intermediate_size);
    EXPECT_EQ(g.max_position_embeddings, d.max_position_embeddings);
    EXPECT_EQ(g.type_vocab_size, d.type_vocab_size);
    EXPECT_FLOAT_EQ(g.layer_norm_eps, d.layer_norm_eps);  // GGUF keeps an f32
    EXPECT_EQ(g.pooling, ModelConfig::Pooling::kMean);
    EXPECT_TRUE(IsEncoderArchitecture(g));
    const std::vector<std::vector<float>> got = Embed(gguf, &pool);
    ASSERT_EQ(got.size(), want.size());
    for (size_t s = 0; s < want.size(); ++s) {
      EXPECT_GT(Cosine(got[s], want[s]), min_cosine) << outtype << " sentence " << s;
    }
  }
}

TEST(BertGgufTest, PoolingTypeKey) {
  std::shared_ptr<const Checkpoint> cls = Load(Convert("f16", {"--pooling_type", "2"}));
  ASSERT_NE(cls, nullptr);
  EXPECT_EQ(cls->config().pooling, ModelConfig::Pooling::kCls);
  std::shared_ptr<const Checkpoint> none = Load(Convert("f16", {"--pooling_type", "0"}));
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->config().pooling, ModelConfig::Pooling::kUnset);
  // A reranker's rank pooling needs its classifier head: refused, named.
  absl::StatusOr<std::unique_ptr<Checkpoint>> rank =
      loader::LoadCheckpoint(Convert("f16", {"--pooling_type", "4"}));
  ASSERT_FALSE(rank.ok());
  EXPECT_EQ(rank.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(rank.status().message().find("bert.pooling_type 4 (rank"), std::string::npos)
      << rank.status();
}

}  // namespace
}  // namespace rill::worker
