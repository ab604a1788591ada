// Config keys and GGUF metadata that change the model's math: each is either
// read (transformers 5 rope_parameters, sliding windows) or refused at load
// with an error naming it, never silently ignored.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "worker/loader/checkpoint.h"
#include "worker/loader/gguf_writer.h"
#include "worker/loader/safetensors_writer.h"

namespace rill::worker::loader {
namespace {

// Tiny llama: hidden 8, 2 heads of 4, 1 kv head, ffn 16, vocab 10, 3 layers.
constexpr int64_t kH = 8, kHeads = 2, kKv = 1, kHd = 4, kFfn = 16, kVocab = 10, kLayers = 3;

std::vector<float> Zeros(int64_t n) { return std::vector<float>(n, 0.0f); }

std::string TmpPath(const std::string& name) {
  const char* t = getenv("TEST_TMPDIR");
  return std::string(t ? t : "/tmp") + "/" + name;
}

// Which tensors LoadHf writes besides the Llama ones.
enum class Extra { kNone, kGemma3, kPhi3 };

// An HF directory whose config.json is the base llama config with `extra`
// members appended (`model_type` included there).
absl::StatusOr<std::unique_ptr<Checkpoint>> LoadHf(const std::string& name,
                                                    const std::string& extra,
                                                    Extra tensors = Extra::kNone) {
  const std::string dir = TmpPath(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << absl::StrCat(
      R"({"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 3,
          "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 16,
          "max_position_embeddings": 256, )",
      extra, "}");
  SafetensorsWriter w;
  w.AddF32Tensor("model.embed_tokens.weight", {kVocab, kH}, Zeros(kH * kVocab));
  w.AddF32Tensor("model.norm.weight", {kH}, Zeros(kH));
  for (int l = 0; l < kLayers; ++l) {
    const std::string b = absl::StrCat("model.layers.", l, ".");
    w.AddF32Tensor(b + "input_layernorm.weight", {kH}, Zeros(kH));
    if (tensors == Extra::kPhi3) {
      const int64_t qkv = (kHeads + 2 * kKv) * kHd;
      w.AddF32Tensor(b + "self_attn.qkv_proj.weight", {qkv, kH}, Zeros(kH * qkv));
      w.AddF32Tensor(b + "mlp.gate_up_proj.weight", {2 * kFfn, kH}, Zeros(kH * 2 * kFfn));
    } else {
      w.AddF32Tensor(b + "self_attn.q_proj.weight", {kHeads * kHd, kH},
                     Zeros(kH * kHeads * kHd));
      w.AddF32Tensor(b + "self_attn.k_proj.weight", {kKv * kHd, kH}, Zeros(kH * kKv * kHd));
      w.AddF32Tensor(b + "self_attn.v_proj.weight", {kKv * kHd, kH}, Zeros(kH * kKv * kHd));
      w.AddF32Tensor(b + "mlp.gate_proj.weight", {kFfn, kH}, Zeros(kH * kFfn));
      w.AddF32Tensor(b + "mlp.up_proj.weight", {kFfn, kH}, Zeros(kH * kFfn));
    }
    w.AddF32Tensor(b + "self_attn.o_proj.weight", {kH, kHeads * kHd}, Zeros(kH * kHeads * kHd));
    w.AddF32Tensor(b + "post_attention_layernorm.weight", {kH}, Zeros(kH));
    w.AddF32Tensor(b + "mlp.down_proj.weight", {kH, kFfn}, Zeros(kH * kFfn));
    if (tensors == Extra::kGemma3) {
      w.AddF32Tensor(b + "pre_feedforward_layernorm.weight", {kH}, Zeros(kH));
      w.AddF32Tensor(b + "post_feedforward_layernorm.weight", {kH}, Zeros(kH));
      w.AddF32Tensor(b + "self_attn.q_norm.weight", {kHd}, Zeros(kHd));
      w.AddF32Tensor(b + "self_attn.k_norm.weight", {kHd}, Zeros(kHd));
    }
  }
  if (absl::Status s = w.WriteFile(dir + "/model.safetensors"); !s.ok()) return s;
  return LoadCheckpoint(dir);
}

// Expects a load error whose message contains every one of `needles`.
void ExpectRefused(const absl::StatusOr<std::unique_ptr<Checkpoint>>& c,
                   std::initializer_list<const char*> needles) {
  ASSERT_FALSE(c.ok()) << "loaded, but should have been refused";
  EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
  for (const char* n : needles) {
    EXPECT_NE(c.status().message().find(n), std::string::npos)
        << "'" << n << "' not in: " << c.status().message();
  }
}

TEST(MathConfigKeysTest, Transformers5RopeParametersAreRead) {
  auto c = LoadHf("tf5_llama3", R"("model_type": "llama", "rope_parameters": {
      "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})");
  ASSERT_TRUE(c.ok()) << c.status();
  const ModelConfig& m = (*c)->config();
  EXPECT_DOUBLE_EQ(m.rope_theta, 500000.0);
  EXPECT_EQ(m.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_DOUBLE_EQ(m.rope_scaling.factor, 8.0);
  EXPECT_EQ(m.rope_scaling.original_max_position_embeddings, 8192);

  c = LoadHf("tf5_default",
             R"("model_type": "qwen2", "attention_bias": false, "rope_parameters": {"rope_type": "default",
                "rope_theta": 1000000.0})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ((*c)->config().rope_theta, 1e6);
  EXPECT_EQ((*c)->config().rope_scaling.type, RopeScaling::Type::kNone);

  // Both forms, agreeing: fine; disagreeing: refused.
  c = LoadHf("tf5_both", R"("model_type": "llama", "rope_theta": 1000.0,
      "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000.0},
      "rope_scaling": {"type": "linear", "factor": 2.0})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ((*c)->config().rope_theta, 1000.0);
  EXPECT_EQ((*c)->config().rope_scaling.type, RopeScaling::Type::kLinear);
  ExpectRefused(LoadHf("tf5_theta_conflict", R"("model_type": "llama", "rope_theta": 10000.0,
      "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0})"),
                {"rope_theta", "disagrees"});
  ExpectRefused(LoadHf("tf5_scaling_conflict", R"("model_type": "llama",
      "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000.0},
      "rope_scaling": {"type": "linear", "factor": 4.0})"),
                {"rope_scaling", "disagrees"});
}

TEST(MathConfigKeysTest, UnimplementedRopeIsRefusedByName) {
  ExpectRefused(LoadHf("rope_yarn", R"("model_type": "llama", "rope_parameters": {
      "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0})"),
                {"rope_parameters.rope_type 'yarn'", "supported: default, linear, llama3"});
  ExpectRefused(LoadHf("rope_dynamic", R"("model_type": "llama",
      "rope_scaling": {"type": "dynamic", "factor": 2.0})"),
                {"rope_scaling.rope_type 'dynamic'"});
  ExpectRefused(LoadHf("rope_unknown_key", R"("model_type": "llama", "rope_scaling": {
      "rope_type": "linear", "factor": 2.0, "beta_fast": 32})"),
                {"rope_scaling.beta_fast", "linear"});
  ExpectRefused(LoadHf("rope_per_layer", R"("model_type": "llama", "rope_parameters": {
      "full_attention": {"rope_type": "default", "rope_theta": 1e6},
      "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})"),
                {"per-layer-type rope_parameters"});
  ExpectRefused(LoadHf("rope_partial", R"("model_type": "llama", "partial_rotary_factor": 0.5)"),
                {"partial_rotary_factor"});
  ExpectRefused(LoadHf("llama3_no_ctx", R"("model_type": "llama", "rope_scaling": {
      "rope_type": "llama3", "factor": 8.0})"),
                {"original_max_position_embeddings"});
}

TEST(MathConfigKeysTest, SlidingWindowsFollowTransformers) {
  auto c = LoadHf("mistral", R"("model_type": "mistral", "sliding_window": 4096)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().sliding_window, 4096);
  for (int l = 0; l < kLayers; ++l) EXPECT_EQ((*c)->config().LayerWindow(l), 4096) << l;

  c = LoadHf("mistral_null", R"("model_type": "mistral", "sliding_window": null)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().LayerWindow(0), 0);

  // Qwen2.5 configs carry a window that is off unless use_sliding_window.
  c = LoadHf("qwen2_off", R"("model_type": "qwen2", "attention_bias": false, "sliding_window": 131072,
      "use_sliding_window": false, "max_window_layers": 1)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().sliding_window, 0);
  c = LoadHf("qwen2_on", R"("model_type": "qwen2", "attention_bias": false, "sliding_window": 64,
      "use_sliding_window": true, "max_window_layers": 1)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().LayerWindow(0), 0);
  EXPECT_EQ((*c)->config().LayerWindow(1), 64);
  EXPECT_EQ((*c)->config().LayerWindow(2), 64);
  c = LoadHf("qwen2_types", R"("model_type": "qwen2", "attention_bias": false, "sliding_window": 64,
      "use_sliding_window": true,
      "layer_types": ["sliding_attention", "full_attention", "sliding_attention"])");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().LayerWindow(0), 64);
  EXPECT_EQ((*c)->config().LayerWindow(1), 0);
  EXPECT_EQ((*c)->config().LayerWindow(2), 64);

  ExpectRefused(LoadHf("llama_window", R"("model_type": "llama", "sliding_window": 4096)"),
                {"sliding_window", "'llama'"});
  ExpectRefused(LoadHf("bad_types", R"("model_type": "mistral", "sliding_window": 8,
      "layer_types": ["chunked_attention", "full_attention", "full_attention"])"),
                {"layer_types", "chunked_attention"});
  ExpectRefused(LoadHf("short_types", R"("model_type": "mistral", "sliding_window": 8,
      "layer_types": ["full_attention"])"),
                {"layer_types"});
}

TEST(MathConfigKeysTest, OtherMathKeysAreRefused) {
  ExpectRefused(LoadHf("gelu", R"("model_type": "llama", "hidden_act": "gelu")"),
                {"hidden_act 'gelu'"});
  ExpectRefused(LoadHf("mlp_bias", R"("model_type": "llama", "mlp_bias": true)"), {"mlp_bias"});
  ExpectRefused(LoadHf("long_type", absl::StrCat(R"("model_type": "llama", "rope_parameters": {
      "rope_type": ")", std::string(10000, 'x'), R"("})")),
                {"bytes)"});
  // A long key is quoted short: the message stays small.
  auto c = LoadHf("long_key", absl::StrCat(R"("model_type": "llama", "rope_scaling": {
      "rope_type": "linear", "factor": 2.0, ")", std::string(10000, 'k'), R"(": 1})"));
  ASSERT_FALSE(c.ok());
  EXPECT_LT(c.status().message().size(), 400u) << c.status().message().size();
}

TEST(MathConfigKeysTest, MixtureOfExpertsKeysAreReadOrRefused) {
  // MoE keys on a dense model type.
  ExpectRefused(LoadHf("dense_experts", R"("model_type": "llama", "num_experts": 8)"),
                {"num_experts", "'llama'", "dense model"});
  ExpectRefused(LoadHf("dense_local", R"("model_type": "qwen2", "num_local_experts": 8)"),
                {"num_local_experts"});
  // Keys of another MoE family, or values that cannot run.
  ExpectRefused(LoadHf("qwen3_shared", R"("model_type": "qwen3_moe", "num_experts": 4,
      "num_experts_per_tok": 2, "moe_intermediate_size": 8,
      "shared_expert_intermediate_size": 16)"),
                {"shared_expert_intermediate_size", "'qwen3_moe'"});
  ExpectRefused(LoadHf("mixtral_deepseek", R"("model_type": "mixtral", "num_local_experts": 4,
      "n_shared_experts": 2)"),
                {"n_shared_experts", "'mixtral'"});
  ExpectRefused(LoadHf("mixtral_topk", R"("model_type": "mixtral", "num_local_experts": 2,
      "num_experts_per_tok": 3)"),
                {"experts used per token (3)", "experts (2)"});
  ExpectRefused(LoadHf("qwen2moe_window", R"("model_type": "qwen2_moe", "use_sliding_window": true,
      "sliding_window": 8)"),
                {"use_sliding_window", "qwen2_moe"});
  ExpectRefused(LoadHf("qwen2moe_layers", R"("model_type": "qwen2_moe", "mlp_only_layers": [3])"),
                {"mlp_only_layers", "[0, 3)"});
  ExpectRefused(LoadHf("qwen2moe_step", R"("model_type": "qwen2_moe", "decoder_sparse_step": 0)"),
                {"decoder_sparse_step"});
  // A MoE config over a dense checkpoint: the router is named as missing.
  ExpectRefused(LoadHf("mixtral_dense_tensors", R"("model_type": "mixtral",
      "num_local_experts": 2, "num_experts_per_tok": 1)"),
                {"missing tensor 'blk.0.ffn_gate_inp'"});
  // Every layer dense (mlp_only_layers lists them all): loads as a dense model.
  auto c = LoadHf("qwen2moe_all_dense", R"("model_type": "qwen2_moe", "num_experts": 2,
      "num_experts_per_tok": 1, "moe_intermediate_size": 8, "shared_expert_intermediate_size": 8,
      "qkv_bias": false, "mlp_only_layers": [0, 1, 2])");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().expert_count, 2);
  for (int l = 0; l < kLayers; ++l) EXPECT_FALSE((*c)->config().IsMoeLayer(l)) << l;
  EXPECT_FALSE((*c)->config().attention_bias);
  // decoder_sparse_step 2: layers 1 (and 3, ...) are sparse.
  ExpectRefused(LoadHf("qwen2moe_step2", R"("model_type": "qwen2_moe", "num_experts": 2,
      "num_experts_per_tok": 1, "moe_intermediate_size": 8, "shared_expert_intermediate_size": 8,
      "qkv_bias": false, "decoder_sparse_step": 2)"),
                {"missing tensor 'blk.1.ffn_gate_inp'"});
}

// A tiny llama-layout GGUF of architecture `arch` with `layers` layers,
// without the dense MLP tensors unless dense_mlp.
GgufWriter LlamaGguf(const std::string& arch = "llama", int64_t layers = kLayers,
                     bool dense_mlp = true) {
  GgufWriter w;
  w.AddString("general.architecture", arch);
  w.AddUint32(arch + ".embedding_length", kH);
  w.AddUint32(arch + ".block_count", layers);
  w.AddUint32(arch + ".attention.head_count", kHeads);
  w.AddUint32(arch + ".attention.head_count_kv", kKv);
  w.AddUint32(arch + ".feed_forward_length", kFfn);
  w.AddUint32(arch + ".context_length", 128);
  w.AddF32Tensor("token_embd.weight", {kH, kVocab}, Zeros(kH * kVocab));
  w.AddF32Tensor("output_norm.weight", {kH}, Zeros(kH));
  for (int l = 0; l < layers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    w.AddF32Tensor(b + "attn_norm.weight", {kH}, Zeros(kH));
    w.AddF32Tensor(b + "attn_q.weight", {kH, kHeads * kHd}, Zeros(kH * kHeads * kHd));
    w.AddF32Tensor(b + "attn_k.weight", {kH, kKv * kHd}, Zeros(kH * kKv * kHd));
    w.AddF32Tensor(b + "attn_v.weight", {kH, kKv * kHd}, Zeros(kH * kKv * kHd));
    w.AddF32Tensor(b + "attn_output.weight", {kHeads * kHd, kH}, Zeros(kH * kHeads * kHd));
    w.AddF32Tensor(b + "ffn_norm.weight", {kH}, Zeros(kH));
    if (!dense_mlp) continue;
    w.AddF32Tensor(b + "ffn_gate.weight", {kH, kFfn}, Zeros(kH * kFfn));
    w.AddF32Tensor(b + "ffn_up.weight", {kH, kFfn}, Zeros(kH * kFfn));
    w.AddF32Tensor(b + "ffn_down.weight", {kFfn, kH}, Zeros(kH * kFfn));
  }
  return w;
}

TEST(MathConfigKeysTest, GgufWindowIsReadAndUnsupportedKeysRefused) {
  GgufWriter w = LlamaGguf();
  w.AddUint32("llama.attention.sliding_window", 4096);
  const std::string path = TmpPath("window.gguf");
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto c = LoadCheckpoint(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().LayerWindow(2), 4096);

  struct Case {
    const char* key;
    uint32_t value;
    const char* needle;
  } cases[] = {{"llama.expert_count", 8, "mixture-of-experts"},
               {"llama.rope.dimension_count", 2, "partial rotary"},
               {"llama.attention.value_length", 8, "value_length"},
               {"llama.attn_logit_softcapping", 50, "attn_logit_softcapping"}};
  for (const Case& k : cases) {
    GgufWriter bad = LlamaGguf();
    bad.AddUint32(k.key, k.value);
    const std::string p = TmpPath("bad.gguf");
    ASSERT_TRUE(bad.WriteFile(p).ok());
    ExpectRefused(LoadCheckpoint(p), {k.needle});
  }
}

// A decoder GGUF's <arch>.pooling_type is the default pooling of its
// embeddings (Qwen3-Embedding: last); a rank one (a reranker head Rill does
// not run) leaves none and the model still loads to generate; not a type: refused.
TEST(MathConfigKeysTest, GgufPoolingTypeOfADecoder) {
  auto load = [](uint32_t type) {
    GgufWriter w = LlamaGguf();
    w.AddUint32("llama.pooling_type", type);
    const std::string path = TmpPath("pooling.gguf");
    EXPECT_TRUE(w.WriteFile(path).ok());
    return LoadCheckpoint(path);
  };
  auto last = load(3);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ((*last)->config().pooling, ModelConfig::Pooling::kLast);
  auto rank = load(4);
  ASSERT_TRUE(rank.ok()) << rank.status();
  EXPECT_EQ((*rank)->config().pooling, ModelConfig::Pooling::kUnset);
  ExpectRefused(load(9), {"llama.pooling_type 9", "not a pooling type"});
}

TEST(MathConfigKeysTest, GgufMixtureOfExpertsKeysAreReadOrRefused) {
  auto load = [](const std::vector<std::pair<const char*, uint32_t>>& keys,
                 int64_t stacked_experts = 0) {
    GgufWriter w = LlamaGguf();
    for (const auto& [key, value] : keys) w.AddUint32(key, value);
    if (stacked_experts > 0) {
      w.AddF32Tensor("blk.0.ffn_gate_exps.weight", {kH, kFfn, stacked_experts},
                     Zeros(kH * kFfn * stacked_experts));
    }
    const std::string p = TmpPath("moe.gguf");
    EXPECT_TRUE(w.WriteFile(p).ok());
    return LoadCheckpoint(p);
  };
  ExpectRefused(load({{"llama.expert_count", 4}, {"llama.expert_used_count", 2},
                      {"llama.expert_gating_func", 2}}),
                {"expert_gating_func 2", "softmax"});
  ExpectRefused(load({{"llama.expert_count", 4}, {"llama.expert_used_count", 2},
                      {"llama.leading_dense_block_count", 1}}),
                {"leading_dense_block_count"});
  ExpectRefused(load({{"llama.expert_count", 4}, {"llama.expert_used_count", 2},
                      {"llama.expert_shared_count", 1}}),
                {"expert_shared_count 1"});
  ExpectRefused(load({{"llama.expert_count", 4}, {"llama.expert_used_count", 5}}),
                {"experts used per token (5)"});
  ExpectRefused(load({{"llama.expert_count", 4}, {"llama.expert_used_count", 2}}),
                {"missing tensor 'blk.0.ffn_gate_inp'"});
  // Another architecture's expert_count.
  GgufWriter qwen2 = LlamaGguf("qwen2");
  qwen2.AddUint32("qwen2.expert_count", 4);
  ASSERT_TRUE(qwen2.WriteFile(TmpPath("qwen2_moe.gguf")).ok());
  ExpectRefused(LoadCheckpoint(TmpPath("qwen2_moe.gguf")),
                {"qwen2.expert_count", "'qwen2'", "qwen2moe, qwen3moe"});
  // A stacked expert tensor must hold expert_count experts.
  ExpectRefused(load({{"llama.expert_count", 4}, {"llama.expert_used_count", 2}}, 3),
                {"blk.0.ffn_gate_exps", "4 experts"});
}

// llama.cpp's early Mixtral files name each expert's matrices
// blk.N.ffn_gate.E (no stacked tensors): read as the same experts.
TEST(MathConfigKeysTest, GgufPerExpertTensorNamesAreRead) {
  constexpr int64_t kExperts = 2;
  GgufWriter w = LlamaGguf("llama", 1, /*dense_mlp=*/false);
  w.AddUint32("llama.expert_count", kExperts);
  w.AddUint32("llama.expert_used_count", 1);
  w.AddF32Tensor("blk.0.ffn_gate_inp.weight", {kH, kExperts}, Zeros(kH * kExperts));
  for (int e = 0; e < kExperts; ++e) {
    w.AddF32Tensor(absl::StrCat("blk.0.ffn_gate.", e, ".weight"), {kH, kFfn}, Zeros(kH * kFfn));
    w.AddF32Tensor(absl::StrCat("blk.0.ffn_up.", e, ".weight"), {kH, kFfn}, Zeros(kH * kFfn));
    w.AddF32Tensor(absl::StrCat("blk.0.ffn_down.", e, ".weight"), {kFfn, kH}, Zeros(kH * kFfn));
  }
  const std::string path = TmpPath("per_expert.gguf");
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto c = LoadCheckpoint(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().expert_count, kExperts);
  EXPECT_TRUE((*c)->config().expert_weights_norm);
  EXPECT_EQ((*c)->config().expert_intermediate_size, kFfn);
  for (int e = 0; e < kExperts; ++e) {
    for (const char* stem : {"ffn_gate_exps.", "ffn_up_exps.", "ffn_down_exps."}) {
      EXPECT_NE((*c)->Find(absl::StrCat("blk.0.", stem, e)), nullptr) << stem << e;
    }
  }
  EXPECT_EQ((*c)->Find("blk.0.ffn_gate.0"), nullptr);
}

TEST(MathConfigKeysTest, Gemma3ConfigsFollowGemma3TextConfig) {
  // Class defaults: sliding_window_pattern 6 (all 3 layers slide), window
  // 4096, global base 1e6 and local 1e4, query_pre_attn_scalar 256, no caps.
  auto c = LoadHf("gemma3", R"("model_type": "gemma3_text", "head_dim": 4)", Extra::kGemma3);
  ASSERT_TRUE(c.ok()) << c.status();
  const ModelConfig& m = (*c)->config();
  EXPECT_DOUBLE_EQ(m.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(m.local_rope_theta, 1e4);
  EXPECT_DOUBLE_EQ(m.attention_scale, 1.0 / 16.0);
  EXPECT_EQ(m.attn_logit_softcap, 0.0);
  EXPECT_EQ(m.final_logit_softcap, 0.0);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_TRUE(m.post_norms);
  EXPECT_DOUBLE_EQ(m.norm_weight_offset, 1.0);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_EQ(m.LayerWindow(l), 4096) << l;
    EXPECT_TRUE(m.UsesLocalRope(l)) << l;
  }
  // An explicit pattern; legacy rope_scaling applies to the global layers.
  c = LoadHf("gemma3_pattern", R"("model_type": "gemma3_text", "head_dim": 4,
      "sliding_window": 16, "sliding_window_pattern": 2, "rope_local_base_freq": 5000.0,
      "rope_scaling": {"rope_type": "linear", "factor": 8.0})",
             Extra::kGemma3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().LayerWindow(0), 16);
  EXPECT_EQ((*c)->config().LayerWindow(1), 0);
  EXPECT_FALSE((*c)->config().UsesLocalRope(1));
  EXPECT_DOUBLE_EQ((*c)->config().local_rope_theta, 5000.0);
  EXPECT_EQ((*c)->config().rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_EQ((*c)->config().local_rope_scaling.type, RopeScaling::Type::kNone);
  // transformers 5: per-layer-type rope_parameters and layer_types.
  c = LoadHf("gemma3_tf5", R"("model_type": "gemma3_text", "head_dim": 4,
      "layer_types": ["full_attention", "sliding_attention", "full_attention"],
      "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 2.0,
      "rope_theta": 500000.0}, "sliding_attention": {"rope_type": "default",
      "rope_theta": 20000.0}})",
             Extra::kGemma3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ((*c)->config().rope_theta, 5e5);
  EXPECT_DOUBLE_EQ((*c)->config().local_rope_theta, 2e4);
  EXPECT_TRUE((*c)->config().UsesLocalRope(1));
  EXPECT_FALSE((*c)->config().UsesLocalRope(0));
  EXPECT_EQ((*c)->config().LayerWindow(0), 0);
  EXPECT_EQ((*c)->config().LayerWindow(1), 4096);

  ExpectRefused(LoadHf("gemma3_type", R"("model_type": "gemma3_text", "head_dim": 4,
      "rope_parameters": {"full_attention": {"rope_type": "default"},
      "chunked_attention": {"rope_type": "default"}})",
                       Extra::kGemma3),
                {"rope_parameters.chunked_attention"});
  ExpectRefused(LoadHf("gemma3_local_conflict", R"("model_type": "gemma3_text", "head_dim": 4,
      "rope_local_base_freq": 10000.0, "rope_parameters": {"full_attention": {"rope_type":
      "default"}, "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}})",
                       Extra::kGemma3),
                {"rope_local_base_freq", "disagrees"});
  ExpectRefused(LoadHf("gemma3_flat", R"("model_type": "gemma3_text", "head_dim": 4,
      "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0})",
                       Extra::kGemma3),
                {"full_attention and sliding_attention"});
  ExpectRefused(LoadHf("gemma3_bidi", R"("model_type": "gemma3_text", "head_dim": 4,
      "use_bidirectional_attention": true)",
                       Extra::kGemma3),
                {"use_bidirectional_attention"});
  ExpectRefused(LoadHf("gemma3_act", R"("model_type": "gemma3_text", "head_dim": 4,
      "hidden_activation": "gelu")",
                       Extra::kGemma3),
                {"hidden_activation 'gelu'"});
  ExpectRefused(LoadHf("gemma3_mm", R"("model_type": "gemma3")"), {"text_config"});
}

// LlamaGguf plus the norms a Gemma 2 / Gemma 3 checkpoint must hold.
GgufWriter GemmaGguf(const std::string& arch) {
  GgufWriter w = LlamaGguf(arch);
  for (int l = 0; l < kLayers; ++l) {
    const std::string b = absl::StrCat("blk.", l, ".");
    w.AddF32Tensor(b + "post_attention_norm.weight", {kH}, Zeros(kH));
    w.AddF32Tensor(b + "post_ffw_norm.weight", {kH}, Zeros(kH));
    if (arch == "gemma3") {
      w.AddF32Tensor(b + "attn_q_norm.weight", {kHd}, Zeros(kHd));
      w.AddF32Tensor(b + "attn_k_norm.weight", {kHd}, Zeros(kHd));
    }
  }
  return w;
}

// GGUF's <arch>.attention.sliding_window_pattern, as llama.cpp's
// load_swa_pattern reads it: a period n (layer i slides unless
// i % n == n - 1; 0: every layer) or one bool / integer per layer; absent,
// Gemma 3's period 6 and Gemma 2's 2. The sliding layers of Gemma 3 also
// rotate with the local base.
TEST(MathConfigKeysTest, GgufSlidingWindowPatternIsRead) {
  const std::string key = "attention.sliding_window_pattern";
  struct Case {
    const char* name;
    std::string arch;
    std::function<void(GgufWriter*, const std::string&)> set;
    std::vector<bool> sliding;
  };
  const std::vector<Case> cases = {
      {"gemma3_default", "gemma3", nullptr, {true, true, true}},
      {"gemma2_default", "gemma2", nullptr, {true, false, true}},
      {"gemma3_period2", "gemma3", [](GgufWriter* w, const std::string& k) { w->AddUint32(k, 2); },
       {true, false, true}},
      {"gemma3_period3", "gemma3", [](GgufWriter* w, const std::string& k) { w->AddInt32(k, 3); },
       {true, true, false}},
      {"gemma3_period1", "gemma3", [](GgufWriter* w, const std::string& k) { w->AddUint32(k, 1); },
       {false, false, false}},
      {"gemma2_period0", "gemma2", [](GgufWriter* w, const std::string& k) { w->AddUint32(k, 0); },
       {true, true, true}},
      {"gemma3_bools", "gemma3",
       [](GgufWriter* w, const std::string& k) { w->AddBoolArray(k, {false, true, false}); },
       {false, true, false}},
      {"gemma2_ints", "gemma2",
       [](GgufWriter* w, const std::string& k) { w->AddInt32Array(k, {0, 0, 1}); },
       {false, false, true}},
  };
  for (const Case& t : cases) {
    SCOPED_TRACE(t.name);
    GgufWriter w = GemmaGguf(t.arch);
    if (t.set) t.set(&w, t.arch + "." + key);
    const std::string path = TmpPath(absl::StrCat(t.name, ".gguf"));
    ASSERT_TRUE(w.WriteFile(path).ok());
    auto c = LoadCheckpoint(path);
    ASSERT_TRUE(c.ok()) << c.status();
    for (int l = 0; l < kLayers; ++l) {
      EXPECT_EQ((*c)->config().LayerWindow(l), t.sliding[l] ? 4096 : 0) << "layer " << l;
      if (t.arch == "gemma3") EXPECT_EQ((*c)->config().UsesLocalRope(l), t.sliding[l]) << l;
    }
  }
  auto refused = [&](const char* name, std::function<void(GgufWriter*, const std::string&)> set,
                     std::initializer_list<const char*> needles) {
    SCOPED_TRACE(name);
    GgufWriter w = GemmaGguf("gemma3");
    set(&w, "gemma3." + key);
    const std::string path = TmpPath(absl::StrCat(name, ".gguf"));
    ASSERT_TRUE(w.WriteFile(path).ok());
    ExpectRefused(LoadCheckpoint(path), needles);
  };
  refused("short", [](GgufWriter* w, const std::string& k) { w->AddBoolArray(k, {true, false}); },
          {"sliding_window_pattern", "2 entries", "one per layer (3)"});
  refused("floats",
          [](GgufWriter* w, const std::string& k) { w->AddFloat32Array(k, {1.0f, 0.0f, 1.0f}); },
          {"sliding_window_pattern", "float32"});
  refused("negative", [](GgufWriter* w, const std::string& k) { w->AddInt32(k, -2); },
          {"sliding_window_pattern", "period >= 0"});
  refused("string", [](GgufWriter* w, const std::string& k) { w->AddString(k, "6"); },
          {"sliding_window_pattern", "period >= 0"});
}

TEST(MathConfigKeysTest, Phi3LongRopePartialRotaryAndWindow) {
  // Legacy rope_scaling with the first configs' type name "su"; factor =
  // max_position_embeddings / original; fused projections split at load.
  auto c = LoadHf("phi3", R"("model_type": "phi3", "original_max_position_embeddings": 64,
      "sliding_window": 32, "rope_scaling": {"type": "su", "short_factor": [1.0, 2.0],
      "long_factor": [3.0, 4.0]})",
                  Extra::kPhi3);
  ASSERT_TRUE(c.ok()) << c.status();
  const ModelConfig& m = (*c)->config();
  EXPECT_EQ(m.rope_scaling.type, RopeScaling::Type::kLongrope);
  EXPECT_EQ(m.rope_scaling.original_max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(m.rope_scaling.factor, 4.0);
  EXPECT_NEAR(m.rope_scaling.attention_factor, std::sqrt(1 + std::log(4.0) / std::log(64.0)),
              1e-12);
  EXPECT_EQ(m.rope_scaling.long_factor, (std::vector<double>{3.0, 4.0}));
  EXPECT_EQ(m.RopeDim(), kHd);
  for (int l = 0; l < kLayers; ++l) EXPECT_EQ(m.LayerWindow(l), 32) << l;
  ASSERT_NE((*c)->Find("blk.0.attn_k"), nullptr);
  EXPECT_EQ((*c)->Find("blk.0.attn_k")->ne, (std::vector<int64_t>{kH, kKv * kHd}));
  EXPECT_EQ((*c)->Find("blk.0.ffn_up")->ne, (std::vector<int64_t>{kH, kFfn}));
  EXPECT_EQ((*c)->Find("blk.0.attn_qkv"), nullptr);
  // transformers 5 form with partial rotary (2 of 4 dims: one pair).
  c = LoadHf("phi3_tf5", R"("model_type": "phi3", "rope_parameters": {"rope_type": "longrope",
      "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "original_max_position_embeddings":
      256, "short_factor": [1.5], "long_factor": [2.5]})",
             Extra::kPhi3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().RopeDim(), 2);
  EXPECT_DOUBLE_EQ((*c)->config().rope_scaling.attention_factor, 1.0);  // factor 1

  ExpectRefused(LoadHf("phi3_factors", R"("model_type": "phi3", "rope_scaling": {
      "type": "longrope", "short_factor": [1.0], "long_factor": [1.0]})",
                       Extra::kPhi3),
                {"short_factor and long_factor need 2 entries"});
  ExpectRefused(LoadHf("phi3_odd", R"("model_type": "phi3", "partial_rotary_factor": 0.25)",
                       Extra::kPhi3),
                {"partial_rotary_factor", "even"});
  ExpectRefused(LoadHf("llama_longrope", R"("model_type": "llama", "rope_scaling": {
      "type": "longrope", "short_factor": [1.0, 1.0], "long_factor": [1.0, 1.0]})"),
                {"'longrope' is not supported"});
  ExpectRefused(LoadHf("phi3_act", R"("model_type": "phi3", "hidden_act": "gelu_new")",
                       Extra::kPhi3),
                {"hidden_act"});

  // GGUF: rope.dimension_count is the rotary width; LongRoPE tensors pair up.
  GgufWriter w = LlamaGguf("phi3");
  w.AddUint32("phi3.rope.dimension_count", 2);
  std::string path = TmpPath("phi3.gguf");
  ASSERT_TRUE(w.WriteFile(path).ok());
  c = LoadCheckpoint(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().RopeDim(), 2);
  EXPECT_FALSE((*c)->config().rope_interleaved);
  w = LlamaGguf("phi3");
  w.AddUint32("phi3.rope.dimension_count", 3);
  ASSERT_TRUE(w.WriteFile(path).ok());
  ExpectRefused(LoadCheckpoint(path), {"rope.dimension_count 3"});
  w = LlamaGguf("phi3");
  w.AddF32Tensor("rope_factors_long.weight", {2}, {1.0f, 2.0f});
  ASSERT_TRUE(w.WriteFile(path).ok());
  ExpectRefused(LoadCheckpoint(path), {"rope_factors_long and rope_factors_short"});
  // Without rope.scaling.attn_factor: transformers' default from the
  // context lengths (128 / 32).
  w = LlamaGguf("phi3");
  w.AddF32Tensor("rope_factors_long.weight", {2}, {1.0f, 2.0f});
  w.AddF32Tensor("rope_factors_short.weight", {2}, {1.0f, 1.5f});
  w.AddUint32("phi3.rope.scaling.original_context_length", 32);
  ASSERT_TRUE(w.WriteFile(path).ok());
  c = LoadCheckpoint(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().rope_scaling.type, RopeScaling::Type::kLongrope);
  EXPECT_EQ((*c)->config().rope_scaling.short_factor, (std::vector<double>{1.0, 1.5}));
  EXPECT_NEAR((*c)->config().rope_scaling.attention_factor,
              std::sqrt(1 + std::log(4.0) / std::log(32.0)), 1e-12);
  EXPECT_EQ((*c)->Find("rope_factors_long"), nullptr);
}

}  // namespace
}  // namespace rill::worker::loader
