#include "worker/models/cuda/gguf_trim.h"

#include <gtest/gtest.h>

#include "base/model_dir.h"
#include "worker/loader/checkpoint.h"
#include "worker/loader/gguf.h"
#include "worker/models/cuda/tiny_llama_gguf.h"

namespace rill::worker {
namespace {

TEST(WriteTrimmedGguf, KeepsFirstLayersAndLoads) {
  const std::string in_path = tiny_gguf::TmpPath("full.gguf");
  const std::string out_path = tiny_gguf::TmpPath("cut.gguf");
  ASSERT_TRUE(tiny_gguf::TinyLlamaGguf(3, /*with_bias=*/true).WriteFile(in_path).ok());
  auto in = worker::loader::GgufFile::Open(in_path);
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_TRUE(WriteTrimmedGguf(**in, 1, out_path).ok());

  auto ck = worker::loader::LoadCheckpoint(out_path);
  ASSERT_TRUE(ck.ok()) << ck.status();
  EXPECT_EQ((*ck)->config().num_layers, 1);
  EXPECT_EQ((*ck)->config().hidden_size, tiny_gguf::kH);
  EXPECT_NE((*ck)->Find("blk.0.attn_q"), nullptr);
  EXPECT_NE((*ck)->Find("blk.0.attn_q.bias"), nullptr);
  EXPECT_EQ((*ck)->Find("blk.1.attn_q"), nullptr);
  EXPECT_EQ((*ck)->Find("blk.2.ffn_down"), nullptr);

  // Metadata and tensor bytes are copied unchanged.
  auto out = worker::loader::GgufFile::Open(out_path);
  ASSERT_TRUE(out.ok());
  auto tokens = (*out)->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(tokens->size(), static_cast<size_t>(tiny_gguf::kVocab));
  EXPECT_EQ((*tokens)[9], "t9");
  const worker::loader::GgufTensorInfo* a = (*in)->FindTensor("blk.0.ffn_up.weight");
  const worker::loader::GgufTensorInfo* b = (*out)->FindTensor("blk.0.ffn_up.weight");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(a->nbytes, b->nbytes);
  EXPECT_EQ(memcmp(a->data, b->data, a->nbytes), 0);
}

TEST(WriteTrimmedGguf, RejectsBadLayerCount) {
  const std::string in_path = tiny_gguf::TmpPath("full2.gguf");
  ASSERT_TRUE(tiny_gguf::TinyLlamaGguf(2, false).WriteFile(in_path).ok());
  auto in = worker::loader::GgufFile::Open(in_path);
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(WriteTrimmedGguf(**in, 0, tiny_gguf::TmpPath("x.gguf")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteTrimmedGguf(**in, 3, tiny_gguf::TmpPath("x.gguf")).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rill::worker

namespace rill::worker {
namespace {

// The real default model (skipped when absent): the cut copy that travels to
// the GPU box must load with the same shapes and fewer layers.
TEST(WriteTrimmedGguf, DefaultModelCutLoads) {
  const std::string path = base::DefaultModelFilePath();
  auto in = worker::loader::GgufFile::Open(path);
  if (!in.ok()) GTEST_SKIP() << "default model absent: " << in.status();
  const std::string out_path = tiny_gguf::TmpPath("smollm2_cut.gguf");
  ASSERT_TRUE(WriteTrimmedGguf(**in, 2, out_path).ok());
  auto ck = worker::loader::LoadCheckpoint(out_path);
  ASSERT_TRUE(ck.ok()) << ck.status();
  EXPECT_EQ((*ck)->config().num_layers, 2);
  EXPECT_EQ((*ck)->config().vocab_size, 49152);
  EXPECT_EQ((*ck)->config().hidden_size, 576);
  EXPECT_TRUE((*ck)->config().rope_interleaved);
}

}  // namespace
}  // namespace rill::worker
