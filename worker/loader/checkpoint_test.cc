#include "worker/loader/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "worker/loader/gguf_writer.h"
#include "worker/loader/safetensors_writer.h"

namespace rill::worker::loader {
namespace {

// Tiny llama: hidden 8, 2 heads of 4, 1 kv head, ffn 16, vocab 10, 2 layers.
constexpr int64_t kH = 8, kHeads = 2, kKv = 1, kHd = 4, kFfn = 16, kVocab = 10, kLayers = 2;

std::string TmpPath(const std::string& name) {
  const char* t = getenv("TEST_TMPDIR");
  return std::string(t ? t : "/tmp") + "/" + name;
}

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

GgufWriter LlamaGguf(bool tied, int64_t bad_q_rows = 0) {
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.embedding_length", kH);
  w.AddUint32("llama.block_count", kLayers);
  w.AddUint32("llama.attention.head_count", kHeads);
  w.AddUint32("llama.attention.head_count_kv", kKv);
  w.AddUint32("llama.feed_forward_length", kFfn);
  w.AddUint32("llama.context_length", 128);
  w.AddFloat32("llama.rope.freq_base", 100000.0f);
  w.AddFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.AddString("llama.rope.scaling.type", "linear");
  w.AddFloat32("llama.rope.scaling.factor", 2.0f);
  w.AddUint32("tokenizer.ggml.bos_token_id", 1);
  w.AddUint32("tokenizer.ggml.eos_token_id", 2);
  w.AddUint32("tokenizer.ggml.padding_token_id", 3);
  w.AddString("tokenizer.ggml.model", "gpt2");
  std::vector<std::string> tokens;
  for (int i = 0; i < kVocab; ++i) tokens.push_back("t" + std::to_string(i));
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddF32Tensor("token_embd.weight", {kH, kVocab}, Iota(kH * kVocab));
  w.AddF32Tensor("output_norm.weight", {kH}, Iota(kH));
  if (!tied) w.AddF32Tensor("output.weight", {kH, kVocab}, Iota(kH * kVocab));
  for (int l = 0; l < kLayers; ++l) {
    std::string b = "blk." + std::to_string(l) + ".";
    int64_t q_rows = kHeads * kHd + (l == 1 ? bad_q_rows : 0);
    w.AddF32Tensor(b + "attn_norm.weight", {kH}, Iota(kH));
    w.AddF32Tensor(b + "attn_q.weight", {kH, q_rows}, Iota(kH * q_rows));
    w.AddF32Tensor(b + "attn_k.weight", {kH, kKv * kHd}, Iota(kH * kKv * kHd));
    w.AddF32Tensor(b + "attn_v.weight", {kH, kKv * kHd}, Iota(kH * kKv * kHd));
    w.AddF32Tensor(b + "attn_output.weight", {kHeads * kHd, kH}, Iota(kH * kHeads * kHd));
    w.AddF32Tensor(b + "ffn_norm.weight", {kH}, Iota(kH));
    w.AddF32Tensor(b + "ffn_gate.weight", {kH, kFfn}, Iota(kH * kFfn));
    w.AddF32Tensor(b + "ffn_up.weight", {kH, kFfn}, Iota(kH * kFfn));
    w.AddF32Tensor(b + "ffn_down.weight", {kFfn, kH}, Iota(kH * kFfn));
  }
  return w;
}

TEST(CheckpointTest, LoadsGgufLlama) {
  std::string path = TmpPath("tiny_llama.gguf");
  ASSERT_TRUE(LlamaGguf(/*tied=*/true).WriteFile(path).ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = LoadCheckpoint(path);
  ASSERT_TRUE(c.ok()) << c.status();
  const ModelConfig& m = (*c)->config();
  EXPECT_EQ((*c)->format(), Checkpoint::Format::kGguf);
  EXPECT_EQ(m.architecture, "llama");
  EXPECT_EQ(m.vocab_size, kVocab);  // From the token list.
  EXPECT_EQ(m.hidden_size, kH);
  EXPECT_EQ(m.num_layers, kLayers);
  EXPECT_EQ(m.num_heads, kHeads);
  EXPECT_EQ(m.num_kv_heads, kKv);
  EXPECT_EQ(m.head_dim, kHd);
  EXPECT_EQ(m.intermediate_size, kFfn);
  EXPECT_EQ(m.max_position_embeddings, 128);
  EXPECT_DOUBLE_EQ(m.rope_theta, 100000.0);
  EXPECT_EQ(m.rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_DOUBLE_EQ(m.rope_scaling.factor, 2.0);
  EXPECT_NEAR(m.rms_norm_eps, 1e-5, 1e-9);
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_FALSE(m.attention_bias);
  EXPECT_TRUE(m.rope_interleaved);
  EXPECT_EQ(m.bos_token_id, 1);
  EXPECT_EQ(m.eos_token_id, 2);
  EXPECT_EQ(m.pad_token_id, 3);
  EXPECT_EQ((*c)->Find("output"), nullptr);
  const TensorRef* q = (*c)->Find("blk.1.attn_q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, kernels::cpu::GgmlType::kF32);
  EXPECT_EQ(q->ne, (std::vector<int64_t>{kH, kHeads * kHd}));
  EXPECT_EQ(q->nbytes, static_cast<size_t>(kH * kHeads * kHd * 4));
  float v;
  std::memcpy(&v, static_cast<const char*>(q->data) + 4 * 5, 4);
  EXPECT_EQ(v, 5.0f);
  ASSERT_NE((*c)->tokenizer().gguf, nullptr);
  EXPECT_EQ(*(*c)->tokenizer().gguf->GetString("tokenizer.ggml.model"), "gpt2");
  absl::StatusOr<const TensorRef*> missing = (*c)->Get("blk.9.attn_q");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("blk.9.attn_q"), std::string::npos);
}

TEST(CheckpointTest, GgufUntiedHasOutput) {
  std::string path = TmpPath("tiny_llama_untied.gguf");
  ASSERT_TRUE(LlamaGguf(/*tied=*/false).WriteFile(path).ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = LoadCheckpoint(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE((*c)->config().tie_word_embeddings);
  ASSERT_NE((*c)->Find("output"), nullptr);
}

TEST(CheckpointTest, ShapeMismatchNamesTensor) {
  std::string path = TmpPath("tiny_llama_bad.gguf");
  ASSERT_TRUE(LlamaGguf(true, /*bad_q_rows=*/4).WriteFile(path).ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = LoadCheckpoint(path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'blk.1.attn_q'"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("[8, 12]"), std::string::npos) << c.status();
}

TEST(CheckpointTest, MissingPathAndBadArch) {
  EXPECT_TRUE(absl::IsNotFound(LoadCheckpoint(TmpPath("nope.gguf")).status()));
  GgufWriter w;
  w.AddString("general.architecture", "mamba");
  std::string path = TmpPath("mamba.gguf");
  ASSERT_TRUE(w.WriteFile(path).ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = LoadCheckpoint(path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("mamba"), std::string::npos);
}

std::string MakeDir(const std::string& name) {
  std::string d = TmpPath(name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

TEST(CheckpointTest, LoadsHfLlamaWithQwenBias) {
  std::string dir = MakeDir("hf_qwen");
  std::ofstream(dir + "/config.json") << R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 10,
    "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
    "intermediate_size": 16, "max_position_embeddings": 256, "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "bos_token_id": 5,
    "eos_token_id": [6, 7],
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})";
  std::ofstream(dir + "/tokenizer.json") << "{}";
  SafetensorsWriter w;
  // HF stores [out, in] row-major.
  w.AddF32Tensor("model.embed_tokens.weight", {kVocab, kH}, Iota(kH * kVocab));
  w.AddF32Tensor("model.norm.weight", {kH}, Iota(kH));
  w.AddF32Tensor("lm_head.weight", {kVocab, kH}, Iota(kH * kVocab));
  for (int l = 0; l < kLayers; ++l) {
    std::string b = "model.layers." + std::to_string(l) + ".";
    w.AddF32Tensor(b + "input_layernorm.weight", {kH}, Iota(kH));
    w.AddF32Tensor(b + "self_attn.q_proj.weight", {kHeads * kHd, kH}, Iota(kH * kHeads * kHd));
    w.AddF32Tensor(b + "self_attn.q_proj.bias", {kHeads * kHd}, Iota(kHeads * kHd));
    w.AddF32Tensor(b + "self_attn.k_proj.weight", {kKv * kHd, kH}, Iota(kH * kKv * kHd));
    w.AddF32Tensor(b + "self_attn.k_proj.bias", {kKv * kHd}, Iota(kKv * kHd));
    w.AddF32Tensor(b + "self_attn.v_proj.weight", {kKv * kHd, kH}, Iota(kH * kKv * kHd));
    w.AddF32Tensor(b + "self_attn.v_proj.bias", {kKv * kHd}, Iota(kKv * kHd));
    w.AddF32Tensor(b + "self_attn.o_proj.weight", {kH, kHeads * kHd}, Iota(kH * kHeads * kHd));
    w.AddF32Tensor(b + "post_attention_layernorm.weight", {kH}, Iota(kH));
    w.AddF32Tensor(b + "mlp.gate_proj.weight", {kFfn, kH}, Iota(kH * kFfn));
    w.AddF32Tensor(b + "mlp.up_proj.weight", {kFfn, kH}, Iota(kH * kFfn));
    w.AddF32Tensor(b + "mlp.down_proj.weight", {kH, kFfn}, Iota(kH * kFfn));
  }
  ASSERT_TRUE(w.WriteFile(dir + "/model.safetensors").ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = LoadCheckpoint(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  const ModelConfig& m = (*c)->config();
  EXPECT_EQ((*c)->format(), Checkpoint::Format::kSafetensors);
  EXPECT_EQ(m.architecture, "llama");
  EXPECT_EQ(m.head_dim, kHd);
  EXPECT_EQ(m.max_position_embeddings, 256);
  EXPECT_DOUBLE_EQ(m.rope_theta, 1e6);
  EXPECT_NEAR(m.rms_norm_eps, 1e-6, 1e-12);
  EXPECT_TRUE(m.attention_bias);
  EXPECT_FALSE(m.rope_interleaved);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_EQ(m.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_DOUBLE_EQ(m.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(m.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(m.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(m.bos_token_id, 5);
  EXPECT_EQ(m.eos_token_id, 6);
  EXPECT_EQ(m.eos_token_ids, (std::vector<int64_t>{6, 7}));
  EXPECT_EQ((*c)->Find("blk.1.attn_k")->ne, (std::vector<int64_t>{kH, kKv * kHd}));
  EXPECT_EQ((*c)->Find("blk.0.attn_q.bias")->ne, (std::vector<int64_t>{kHeads * kHd}));
  EXPECT_EQ((*c)->Find("blk.0.ffn_down")->ne, (std::vector<int64_t>{kFfn, kH}));
  ASSERT_NE((*c)->Find("output"), nullptr);
  EXPECT_EQ((*c)->tensors().size(), 3u + 12u * kLayers);
  EXPECT_EQ((*c)->tokenizer().gguf, nullptr);
  EXPECT_EQ((*c)->tokenizer().tokenizer_json, dir + "/tokenizer.json");
  EXPECT_TRUE((*c)->tokenizer().tokenizer_config_json.empty());

  // A missing bias is reported by name.
  std::ofstream(dir + "/config.json") << R"({"model_type": "llama", "vocab_size": 10,
    "hidden_size": 8, "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1,
    "intermediate_size": 16, "max_position_embeddings": 256})";
  c = LoadCheckpoint(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'blk.2.attn_norm'"), std::string::npos) << c.status();
}

TEST(CheckpointTest, LoadsHfGpt2AndTransposesConv1D) {
  constexpr int64_t h = 4, layers = 1, vocab = 6, pos = 5, inner = 16;
  std::string dir = MakeDir("hf_gpt2");
  std::ofstream(dir + "/config.json") << R"({"model_type": "gpt2", "vocab_size": 6, "n_embd": 4,
    "n_layer": 1, "n_head": 2, "n_positions": 5, "n_inner": null, "layer_norm_epsilon": 1e-05,
    "bos_token_id": 0, "eos_token_id": 0})";
  SafetensorsWriter w;
  w.AddF32Tensor("wte.weight", {vocab, h}, Iota(vocab * h));
  w.AddF32Tensor("wpe.weight", {pos, h}, Iota(pos * h));
  w.AddF32Tensor("ln_f.weight", {h}, Iota(h));
  w.AddF32Tensor("ln_f.bias", {h}, Iota(h));
  w.AddF32Tensor("h.0.ln_1.weight", {h}, Iota(h));
  w.AddF32Tensor("h.0.ln_1.bias", {h}, Iota(h));
  w.AddF32Tensor("h.0.attn.bias", {1, 1, pos, pos}, Iota(pos * pos));  // Mask buffer: dropped.
  w.AddF32Tensor("h.0.attn.c_attn.weight", {h, 3 * h}, Iota(h * 3 * h));  // [in, out].
  w.AddF32Tensor("h.0.attn.c_attn.bias", {3 * h}, Iota(3 * h));
  w.AddF32Tensor("h.0.attn.c_proj.weight", {h, h}, Iota(h * h));
  w.AddF32Tensor("h.0.attn.c_proj.bias", {h}, Iota(h));
  w.AddF32Tensor("h.0.ln_2.weight", {h}, Iota(h));
  w.AddF32Tensor("h.0.ln_2.bias", {h}, Iota(h));
  w.AddF32Tensor("h.0.mlp.c_fc.weight", {h, inner}, Iota(h * inner));
  w.AddF32Tensor("h.0.mlp.c_fc.bias", {inner}, Iota(inner));
  w.AddF32Tensor("h.0.mlp.c_proj.weight", {inner, h}, Iota(h * inner));
  w.AddF32Tensor("h.0.mlp.c_proj.bias", {h}, Iota(h));
  ASSERT_TRUE(w.WriteFile(dir + "/model.safetensors").ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = LoadCheckpoint(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  const ModelConfig& m = (*c)->config();
  EXPECT_EQ(m.architecture, "gpt2");
  EXPECT_EQ(m.intermediate_size, inner);
  EXPECT_EQ(m.max_position_embeddings, pos);
  EXPECT_EQ(m.num_layers, layers);
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_EQ((*c)->Find("h.0.attn.bias"), nullptr);
  EXPECT_EQ((*c)->Find("pos_embd")->ne, (std::vector<int64_t>{h, pos}));
  const TensorRef* qkv = (*c)->Find("blk.0.attn_qkv");
  ASSERT_NE(qkv, nullptr);
  EXPECT_FALSE(qkv->transposed);
  EXPECT_EQ(qkv->ne, (std::vector<int64_t>{h, 3 * h}));
  // Row j (output j) holds column j of the stored [in, out] matrix:
  // element (row j, col i) = stored[i][j] = i * 3h + j.
  const float* d = static_cast<const float*>(qkv->data);
  for (int64_t j = 0; j < 3 * h; ++j) {
    for (int64_t i = 0; i < h; ++i) ASSERT_EQ(d[j * h + i], static_cast<float>(i * 3 * h + j));
  }
  EXPECT_EQ((*c)->Find("blk.0.ffn_down")->ne, (std::vector<int64_t>{inner, h}));
  EXPECT_EQ((*c)->Find("blk.0.ffn_up.bias")->ne, (std::vector<int64_t>{inner}));
}

}  // namespace
}  // namespace rill::worker::loader
