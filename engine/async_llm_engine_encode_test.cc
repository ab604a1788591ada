// AsyncLLMEngine::Encode on real models: all-MiniLM-L6-v2 (BERT, text
// through its WordPiece tokenizer) and SmolLM2 (decoder hidden states), and
// on a fake executor that cannot pool.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <glog/logging.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/model_dir.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "engine/fake_model_executor.h"
#include "engine/model_path.h"

namespace rill::engine {
namespace {

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += double(a[i]) * b[i];
  return d;
}

// Rill's Encode (WordPiece tokenizer, BERT encoder, mean pooling, L2
// normalization) against sentence-transformers' own output for the same
// sentences (tests/reference/sentence_transformers_minilm.py made the fixture).
TEST(EncodeTest, MatchesSentenceTransformersOnHundredSentences) {
  const std::string dir = "tests/reference/testdata/";
  std::ifstream texts_in(dir + "st_minilm_sentences.txt");
  ASSERT_TRUE(texts_in.good()) << "missing " << dir << "st_minilm_sentences.txt";
  std::vector<std::string> texts;
  for (std::string line; std::getline(texts_in, line);) texts.push_back(line);
  ASSERT_EQ(texts.size(), 100u);
  constexpr int kDim = 384;
  std::vector<float> ref(texts.size() * kDim);
  std::ifstream emb_in(dir + "st_minilm_embeddings.f32", std::ios::binary);
  emb_in.read(reinterpret_cast<char*>(ref.data()), ref.size() * sizeof(float));
  ASSERT_TRUE(emb_in.good()) << "short st_minilm_embeddings.f32";

  EngineArgs args;
  args.model = base::DefaultEmbedModelPath();
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine = CreateAsyncLLMEngine(args);
  ASSERT_TRUE(engine.ok()) << engine.status() << " (run tools/setup.sh)";
  double worst = 1.0;
  for (size_t s = 0; s < texts.size(); ++s) {
    absl::StatusOr<EmbeddingOutput> out = (*engine)->Encode(texts[s], {}, absl::StrCat("st", s));
    ASSERT_TRUE(out.ok()) << out.status() << " sentence " << s;
    ASSERT_EQ(out->embedding.size(), static_cast<size_t>(kDim));
    const std::vector<float> want(ref.begin() + s * kDim, ref.begin() + (s + 1) * kDim);
    const double cosine = Dot(out->embedding, want) /
                          std::sqrt(Dot(out->embedding, out->embedding) * Dot(want, want));
    worst = std::min(worst, cosine);
    EXPECT_GT(cosine, 0.9999) << "sentence " << s << ": " << texts[s];
  }
  std::printf("worst cosine vs sentence-transformers over %zu sentences: %.8f\n", texts.size(),
              worst);
}

TEST(EncodeTest, BertTextEmbeddingsAreSemantic) {
  EngineArgs args;
  args.model = base::DefaultEmbedModelPath();
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine = CreateAsyncLLMEngine(args);
  ASSERT_TRUE(engine.ok()) << engine.status() << " (run tools/setup.sh)";
  AsyncLLMEngine& e = **engine;
  EXPECT_TRUE(e.SupportsEncode());
  EXPECT_FALSE(e.SupportsGenerate());
  absl::StatusOr<EmbeddingOutput> a = e.Encode("A man is eating food.", {}, "a");
  absl::StatusOr<EmbeddingOutput> b = e.Encode("A man is eating a piece of bread.", {}, "b");
  absl::StatusOr<EmbeddingOutput> c = e.Encode("The girl is carrying a baby.", {}, "c");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status() << b.status() << c.status();
  ASSERT_EQ(a->embedding.size(), 384u);
  EXPECT_EQ(a->num_prompt_tokens, 8);  // [CLS] a man is eating food . [SEP]
  EXPECT_NEAR(Dot(a->embedding, a->embedding), 1.0, 1e-5);
  // Published sentence-transformers similarities for all-MiniLM-L6-v2
  // (also what tests/reference/reference_bert.py gives).
  EXPECT_NEAR(Dot(a->embedding, b->embedding), 0.7553, 2e-3);
  EXPECT_NEAR(Dot(a->embedding, c->embedding), -0.1050, 2e-3);

  // Matryoshka truncation + normalization; CLS; no normalization.
  PoolingParams p;
  p.dimensions = 64;
  absl::StatusOr<EmbeddingOutput> t = e.Encode("A man is eating food.", p, "t");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->embedding.size(), 64u);
  EXPECT_NEAR(Dot(t->embedding, t->embedding), 1.0, 1e-5);
  p = PoolingParams{PoolingType::kCls, false, 0};
  absl::StatusOr<EmbeddingOutput> cls = e.Encode("A man is eating food.", p, "cls");
  ASSERT_TRUE(cls.ok()) << cls.status();
  EXPECT_GT(std::abs(Dot(cls->embedding, cls->embedding) - 1.0), 1e-3);

  // 32 concurrent requests (batched on the loop) equal the same request alone.
  std::vector<std::string> texts;
  for (int i = 0; i < 32; ++i) texts.push_back(absl::StrCat("sentence number ", i, std::string(i % 7, '!')));
  std::vector<std::vector<float>> alone;
  for (int i = 0; i < 32; ++i) alone.push_back(e.Encode(texts[i], {}, absl::StrCat("alone", i))->embedding);
  absl::Mutex mu;
  std::vector<std::vector<float>> together(32);
  int done = 0;
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(e.EncodeAsync(texts[i], {}, absl::StrCat("batch", i),
                              [&, i](absl::StatusOr<EmbeddingOutput> r) {
                                absl::MutexLock l(&mu);
                                if (r.ok()) together[i] = r->embedding;
                                ++done;
                              })
                    .ok());
  }
  {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(+[](int* d) { return *d == 32; }, &done));
  }
  for (int i = 0; i < 32; ++i) {
    ASSERT_EQ(together[i].size(), alone[i].size()) << i;
    for (size_t j = 0; j < alone[i].size(); ++j) ASSERT_NEAR(together[i][j], alone[i][j], 1e-5);
  }

  // Bad input: clear errors, engine keeps serving.
  EXPECT_EQ(e.Encode(std::vector<int32_t>{}, {}, "empty").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<EmbeddingOutput> long_one =
      e.Encode(std::vector<int32_t>(513, 1000), {}, "long");
  EXPECT_EQ(long_one.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(long_one.status().message().find("max_model_len"), std::string::npos);
  p = PoolingParams{};
  p.dimensions = 385;
  EXPECT_EQ(e.Encode("x", p, "dims").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Encode("x", {}, "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Generate("hello", SamplingParams{}, "gen").status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(e.Encode("still serving", {}, "after").ok());
}

TEST(EncodeTest, DecoderPoolsWhileGenerating) {
  struct stat st;
  ASSERT_EQ(stat(ResolveModelPath("default").c_str(), &st), 0) << "run tools/setup.sh";
  EngineArgs args;
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine = CreateAsyncLLMEngine(args);
  ASSERT_TRUE(engine.ok()) << engine.status();
  AsyncLLMEngine& e = **engine;
  const int64_t h = e.GetModelConfig().hidden_size;
  absl::StatusOr<EmbeddingOutput> last = e.Encode("The capital of France is", {}, "last");
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_EQ(static_cast<int64_t>(last->embedding.size()), h);
  EXPECT_NEAR(Dot(last->embedding, last->embedding), 1.0, 1e-5);
  for (PoolingType type : {PoolingType::kMean, PoolingType::kCls}) {
    PoolingParams p;
    p.type = type;
    absl::StatusOr<EmbeddingOutput> o = e.Encode("The capital of France is", p, "other");
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_LT(Dot(o->embedding, last->embedding), 0.9999);
  }

  // The same Encode while a generation runs gives the same embedding.
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 64;
  sp.ignore_eos = true;
  auto stream = e.Generate("Write a story about rivers", sp, "gen");
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<EmbeddingOutput> during = e.Encode("The capital of France is", {}, "during");
  ASSERT_TRUE(during.ok()) << during.status();
  for (int64_t i = 0; i < h; ++i) ASSERT_NEAR(during->embedding[i], last->embedding[i], 1e-5);
  while (true) {
    absl::StatusOr<RequestOutput> o = (*stream)->Next(absl::Seconds(120));
    ASSERT_TRUE(o.ok()) << o.status();
    if (o->finished) break;
  }
  PoolingParams p;
  p.dimensions = static_cast<int32_t>(h) + 1;
  EXPECT_EQ(e.Encode("x", p, "dims").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Encode(std::vector<int32_t>(e.GetEngineConfig().model.max_model_len + 1, 1), {}, "long")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EncodeTest, ModelWithoutPoolingIsUnimplemented) {
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine = AsyncLLMEngine::Create(
      EngineArgs{}, std::make_unique<FakeModelExecutor>(FakeModelExecutor::Options{}), nullptr);
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<EmbeddingOutput> o = (*engine)->Encode(std::vector<int32_t>{1, 2}, {}, "x");
  EXPECT_EQ(o.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(o.status().message().find("pooling"), std::string::npos);
}

}  // namespace
}  // namespace rill::engine
