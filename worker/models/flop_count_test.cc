#include "worker/models/flop_count.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/util/python_runner.h"

namespace rill::worker {
namespace {

// The count from tensor shapes must equal the Llama formula written out from
// the config alone (q, k, v, o, gate, up, down per layer, tied head).
TEST(FlopCountTest, DefaultModelMatchesTheLlamaFormula) {
  const std::string path = rill::tests::util::DefaultModelPath();
  if (access(path.c_str(), R_OK) != 0) GTEST_FAIL() << "default model missing: run tools/setup.sh";
  auto ckpt = worker::loader::LoadCheckpoint(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const worker::loader::ModelConfig& c = (*ckpt)->config();
  ASSERT_TRUE(c.tie_word_embeddings);
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t per_layer = h * q + 2 * h * kv + q * h + 3 * h * c.intermediate_size;
  EXPECT_EQ(MatMulMacsPerToken(**ckpt), c.num_layers * per_layer + c.vocab_size * h);
  EXPECT_EQ(AttentionMacsPerToken(c, 100), 2 * c.num_layers * q * 100);
}

}  // namespace
}  // namespace rill::worker
