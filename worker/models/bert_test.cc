// The BERT encoder on all-MiniLM-L6-v2 against the float64 numpy reference
// (tests/reference/reference_bert.py): 100 sentences of 3..~120 tokens,
// mean pooling + L2 normalization, cosine > 0.9999; a batch of 64 mixed
// lengths equals each sequence alone; bad input gives InvalidArgument.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/model_dir.h"
#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/python_runner.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/encoder.h"
#include "worker/pooling.h"

namespace rill::worker {
namespace {

class BertTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
        worker::loader::LoadCheckpoint(base::DefaultEmbedModelPath());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status() << " (run tools/setup.sh)";
    checkpoint_ = std::shared_ptr<const worker::loader::Checkpoint>(std::move(*ckpt));
    pool_ = new kernels::cpu::ThreadPool(0);
    absl::StatusOr<std::unique_ptr<Encoder>> enc = CreateEncoder(checkpoint_, pool_);
    ASSERT_TRUE(enc.ok()) << enc.status();
    encoder_ = enc->release();
  }
  static void TearDownTestSuite() {
    delete encoder_;
    delete pool_;
    checkpoint_.reset();
  }

  static std::vector<float> EmbedAlone(const std::vector<int32_t>& ids) {
    std::vector<std::vector<float>> hidden;
    absl::Status s = encoder_->Encode({EncoderInput{ids, {}}}, &hidden);
    EXPECT_TRUE(s.ok()) << s;
    return *Pool(hidden[0].data(), ids.size(), encoder_->config().hidden_size, PoolingSpec{});
  }

  static std::shared_ptr<const worker::loader::Checkpoint> checkpoint_;
  static kernels::cpu::ThreadPool* pool_;
  static Encoder* encoder_;
};
std::shared_ptr<const worker::loader::Checkpoint> BertTest::checkpoint_;
kernels::cpu::ThreadPool* BertTest::pool_ = nullptr;
Encoder* BertTest::encoder_ = nullptr;

std::vector<std::vector<int32_t>> ReadIds(const std::string& path) {
  std::vector<std::vector<int32_t>> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<int32_t> ids;
    for (absl::string_view s : absl::StrSplit(line, ',', absl::SkipEmpty())) {
      int32_t id = 0;
      EXPECT_TRUE(absl::SimpleAtoi(s, &id)) << line;
      ids.push_back(id);
    }
    out.push_back(ids);
  }
  return out;
}

TEST_F(BertTest, ConfigIsMiniLm) {
  const worker::loader::ModelConfig& c = encoder_->config();
  EXPECT_EQ(c.architecture, "bert");
  EXPECT_EQ(c.hidden_size, 384);
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_TRUE(IsEncoderArchitecture(c));
}

TEST_F(BertTest, MatchesFloat64ReferenceAndIsBatchInvariant) {
  const std::string tmp = std::getenv("TEST_TMPDIR");
  const std::string ids_path = tmp + "/ids.txt", emb_path = tmp + "/ref.bin";
  absl::StatusOr<tests::util::CommandResult> r = tests::util::RunPython(
      "tests/reference/bert_sentences.py",
      {base::DefaultEmbedModelPath() + "/tokenizer.json", ids_path, "100", "7"});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->output;
  r = tests::util::RunPython(
      "tests/reference/reference_bert.py",
      {"--model", base::DefaultEmbedModelPath(), "--input", ids_path, "--out", emb_path});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->output;

  const std::vector<std::vector<int32_t>> seqs = ReadIds(ids_path);
  ASSERT_EQ(seqs.size(), 100u);
  const int64_t dim = encoder_->config().hidden_size;
  std::vector<float> ref(seqs.size() * dim);
  std::ifstream in(emb_path, std::ios::binary);
  in.read(reinterpret_cast<char*>(ref.data()), ref.size() * sizeof(float));
  ASSERT_TRUE(in.good()) << "short reference file";

  std::vector<std::vector<float>> alone;
  double worst = 1.0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    alone.push_back(EmbedAlone(seqs[s]));
    double dot = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < dim; ++i) {
      const double a = alone[s][i], b = ref[s * dim + i];
      dot += a * b;
      na += a * a;
      nb += b * b;
    }
    const double cosine = dot / std::sqrt(na * nb);
    worst = std::min(worst, cosine);
    EXPECT_GT(cosine, 0.9999) << "sentence " << s << " (" << seqs[s].size() << " tokens)";
  }
  std::printf("worst cosine vs float64 reference over %zu sentences: %.8f\n", seqs.size(), worst);

  // The first 64 sentences (mixed lengths) in one batch, as alone.
  std::vector<EncoderInput> batch;
  for (size_t s = 0; s < 64; ++s) batch.push_back(EncoderInput{seqs[s], {}});
  std::vector<std::vector<float>> hidden;
  ASSERT_TRUE(encoder_->Encode(batch, &hidden).ok());
  for (size_t s = 0; s < 64; ++s) {
    std::vector<float> e = *Pool(hidden[s].data(), seqs[s].size(), dim, PoolingSpec{});
    for (int64_t i = 0; i < dim; ++i) {
      ASSERT_NEAR(e[i], alone[s][i], 1e-5) << "sentence " << s << " feature " << i;
    }
  }
}

TEST_F(BertTest, BadInputIsInvalidArgument) {
  std::vector<std::vector<float>> hidden;
  absl::Status s = encoder_->Encode({EncoderInput{}}, &hidden);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("no tokens"), std::string::npos) << s;
  s = encoder_->Encode({EncoderInput{std::vector<int32_t>(513, 1000), {}}}, &hidden);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("exceed"), std::string::npos) << s;
  s = encoder_->Encode({EncoderInput{{101, 30522, 102}, {}}}, &hidden);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  s = encoder_->Encode({EncoderInput{{101, 102}, {0, 2}}}, &hidden);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  // The maximum length itself works.
  EXPECT_TRUE(encoder_->Encode({EncoderInput{std::vector<int32_t>(512, 1000), {}}}, &hidden).ok());
}

}  // namespace
}  // namespace rill::worker
