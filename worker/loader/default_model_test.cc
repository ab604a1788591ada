// Checks the reader against the real default model (SmolLM2-135M Q4_1).
// Skips when the model is not installed.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <string>

#include "base/model_dir.h"
#include "worker/loader/checkpoint.h"
#include "worker/loader/gguf.h"

namespace rill::worker::loader {
namespace {

class DefaultModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = base::DefaultModelFilePath();
    struct stat st;
    if (::stat(path_.c_str(), &st) != 0) GTEST_SKIP() << "default model not found at " << path_;
  }
  std::string path_;
};

TEST_F(DefaultModelTest, GgufContents) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path_);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 3u);
  ASSERT_EQ((*f)->tensors().size(), 272u);
  std::map<kernels::cpu::GgmlType, int> counts;
  for (const GgufTensorInfo& t : (*f)->tensors()) ++counts[t.type];
  EXPECT_EQ(counts[kernels::cpu::GgmlType::kQ4_1], 210);
  EXPECT_EQ(counts[kernels::cpu::GgmlType::kF32], 61);
  EXPECT_EQ(counts[kernels::cpu::GgmlType::kQ8_0], 1);
  const GgufTensorInfo* e = (*f)->FindTensor("token_embd.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->type, kernels::cpu::GgmlType::kQ8_0);
  EXPECT_EQ(e->ne, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(e->nbytes, 576u / 32 * 34 * 49152);
  EXPECT_EQ(*(*f)->GetString("general.architecture"), "llama");
  EXPECT_EQ(*(*f)->GetInt("llama.block_count"), 30);
  EXPECT_EQ(*(*f)->GetInt("llama.embedding_length"), 576);
  EXPECT_EQ(*(*f)->GetInt("llama.attention.head_count"), 9);
  EXPECT_EQ(*(*f)->GetInt("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(*(*f)->GetInt("llama.feed_forward_length"), 1536);
  EXPECT_DOUBLE_EQ(*(*f)->GetFloat("llama.rope.freq_base"), 100000.0);
  EXPECT_EQ(*(*f)->GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*(*f)->GetString("tokenizer.ggml.pre"), "smollm");
  absl::StatusOr<std::vector<std::string_view>> tokens = (*f)->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(tokens->size(), 49152u);
  EXPECT_EQ((*f)->GetStringArray("tokenizer.ggml.merges")->size(), 48900u);
  EXPECT_EQ((*f)->GetIntArray("tokenizer.ggml.token_type")->size(), 49152u);
  EXPECT_TRUE((*f)->GetString("tokenizer.chat_template").ok());
  // Tensors lie inside the file, in order, without overlap.
  uint64_t end = 0;
  for (const GgufTensorInfo& t : (*f)->tensors()) {
    EXPECT_GE(t.offset, end) << t.name;
    end = t.offset + t.nbytes;
  }
  EXPECT_LE((*f)->data_offset() + end, (*f)->size());
}

TEST_F(DefaultModelTest, CheckpointConfig) {
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = LoadCheckpoint(path_);
  ASSERT_TRUE(c.ok()) << c.status();
  const ModelConfig& m = (*c)->config();
  EXPECT_EQ(m.architecture, "llama");
  EXPECT_EQ(m.vocab_size, 49152);
  EXPECT_EQ(m.hidden_size, 576);
  EXPECT_EQ(m.num_layers, 30);
  EXPECT_EQ(m.num_heads, 9);
  EXPECT_EQ(m.num_kv_heads, 3);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.intermediate_size, 1536);
  EXPECT_EQ(m.max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(m.rope_theta, 100000.0);
  EXPECT_EQ(m.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_NEAR(m.rms_norm_eps, 1e-5, 1e-9);
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_FALSE(m.attention_bias);
  EXPECT_TRUE(m.rope_interleaved);
  EXPECT_EQ(m.bos_token_id, 1);
  EXPECT_EQ(m.eos_token_id, 2);
  EXPECT_EQ(m.pad_token_id, 2);
  EXPECT_EQ((*c)->tensors().size(), 272u);
  EXPECT_EQ((*c)->Find("output"), nullptr);
  const TensorRef* q = (*c)->Find("blk.29.attn_q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, kernels::cpu::GgmlType::kQ4_1);
  EXPECT_EQ(q->ne, (std::vector<int64_t>{576, 576}));
  EXPECT_EQ((*c)->Find("blk.0.attn_k")->ne, (std::vector<int64_t>{576, 192}));
  EXPECT_EQ((*c)->Find("blk.0.ffn_down")->ne, (std::vector<int64_t>{1536, 576}));
  EXPECT_EQ((*c)->Find("output_norm")->type, kernels::cpu::GgmlType::kF32);
  ASSERT_NE((*c)->tokenizer().gguf, nullptr);
  EXPECT_EQ(*(*c)->tokenizer().gguf->GetString("tokenizer.ggml.pre"), "smollm");
}

}  // namespace
}  // namespace rill::worker::loader
