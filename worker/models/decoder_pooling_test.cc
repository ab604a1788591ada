// Decoder hidden states for pooling (SequenceChunk::return_hidden) on the
// default SmolLM2 model: MEAN and LAST pooled, normalized embeddings match
// the float64 reference (tests/reference/reference_model.py --pool-out) to
// cosine > 0.9999, do not depend on the rest of the batch, and asking for
// them leaves the logits unchanged.
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/python_runner.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/causal_lm.h"
#include "worker/pooling.h"

namespace rill::worker {
namespace {

constexpr int kBlockSize = 16;

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += double(a[i]) * b[i];
    na += double(a[i]) * a[i];
    nb += double(b[i]) * b[i];
  }
  return dot / std::sqrt(na * nb);
}

TEST(DecoderPoolingTest, MeanAndLastMatchReferenceInAnyBatch) {
  const std::string path = rill::tests::util::DefaultModelPath();
  ASSERT_EQ(access(path.c_str(), R_OK), 0) << "default model missing: run tools/setup.sh";
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
      worker::loader::LoadCheckpoint(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  kernels::cpu::ThreadPool pool(0);
  absl::StatusOr<std::unique_ptr<CausalLm>> model = CreateCausalLm(std::move(*ckpt), &pool);
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t h = (*model)->config().hidden_size;
  absl::StatusOr<PagedKvCache> cache = PagedKvCache::Create((*model)->CacheShape(8, kBlockSize));
  ASSERT_TRUE(cache.ok()) << cache.status();

  const std::vector<int32_t> prompt = {504, 3575, 282, 4649, 314, 1978, 30, 378, 1345, 1781,
                                       10865, 28, 284, 253, 2381, 2270, 30};
  SequenceChunk alone{prompt, 0, {0, 1}, false, true};
  ForwardBatch b1{{alone}};
  ForwardOutput o1;
  ASSERT_TRUE((*model)->Forward(b1, &*cache, &o1).ok());
  ASSERT_EQ(o1.hidden.size(), 1u);
  ASSERT_EQ(o1.hidden[0].size(), prompt.size() * h);

  // The same prompt after an unrelated sequence that does not want hidden states.
  SequenceChunk other{{1, 2, 3, 4, 5}, 0, {2}, false, false};
  SequenceChunk again{prompt, 0, {3, 4}, false, true};
  ForwardBatch b2{{other, again}};
  ForwardOutput o2;
  ASSERT_TRUE((*model)->Forward(b2, &*cache, &o2).ok());
  EXPECT_TRUE(o2.hidden[0].empty());
  ASSERT_EQ(o2.hidden[1].size(), o1.hidden[0].size());
  for (size_t i = 0; i < o1.hidden[0].size(); ++i) {
    ASSERT_NEAR(o2.hidden[1][i], o1.hidden[0][i], 1e-5) << i;
  }
  // Hidden states do not change the logits.
  SequenceChunk plain{prompt, 0, {5, 6}, false, false};
  ForwardBatch b3{{plain}};
  ForwardOutput o3;
  ASSERT_TRUE((*model)->Forward(b3, &*cache, &o3).ok());
  EXPECT_TRUE(o3.hidden[0].empty());
  EXPECT_EQ(o3.logits[0], o1.logits[0]);

  const std::string tmp = std::getenv("TEST_TMPDIR");
  for (const auto& [name, type] : {std::pair<std::string, PoolingType>{"mean", PoolingType::kMean},
                                   {"last", PoolingType::kLast}}) {
    const std::string out = tmp + "/" + name + ".bin";
    absl::StatusOr<tests::util::CommandResult> r =
        tests::util::RunPython("tests/reference/reference_model.py",
                               {"--model", path, "--tokens", absl::StrJoin(prompt, ","), "--pool",
                                name, "--pool-out", out});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->exit_code, 0) << r->output;
    std::vector<float> ref(h);
    std::ifstream in(out, std::ios::binary);
    in.read(reinterpret_cast<char*>(ref.data()), h * sizeof(float));
    ASSERT_TRUE(in.good());
    PoolingSpec spec;
    spec.type = type;
    std::vector<float> got = *Pool(o1.hidden[0].data(), prompt.size(), h, spec);
    const double cosine = Cosine(got, ref);
    std::printf("%s pooling: cosine vs float64 reference %.8f\n", name.c_str(), cosine);
    EXPECT_GT(cosine, 0.9999) << name;
  }
}

}  // namespace
}  // namespace rill::worker
