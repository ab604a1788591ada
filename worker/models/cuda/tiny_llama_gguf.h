// Test-only: a tiny GGUF Llama (hidden 8, 2 heads of 4, 1 kv head, ffn 16,
// vocab 10) with F32 weights whose values tell the tensors apart and are
// exact in bf16: q/gate/down/o value i % 128, k/up -(i % 128) - 1, v (i % 128)
// + 0.5, so a test can check where each row landed after fusion.
#ifndef RILL_WORKER_MODELS_CUDA_TINY_LLAMA_GGUF_H_
#define RILL_WORKER_MODELS_CUDA_TINY_LLAMA_GGUF_H_

#include <cstdint>
#include <string>
#include <vector>

#include "worker/loader/gguf_writer.h"

namespace rill::worker::tiny_gguf {

constexpr int64_t kH = 8, kHeads = 2, kKv = 1, kHd = 4, kFfn = 16, kVocab = 10;

inline float PlainValue(int64_t i) { return static_cast<float>(i % 128); }
inline float NegValue(int64_t i) { return -static_cast<float>(i % 128) - 1; }
inline float HalfValue(int64_t i) { return static_cast<float>(i % 128) + 0.5f; }

inline std::vector<float> Fill(int64_t n, float (*f)(int64_t)) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = f(i);
  return v;
}

inline worker::loader::GgufWriter TinyLlamaGguf(int layers, bool with_bias) {
  worker::loader::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("tokenizer.ggml.model", "gpt2");
  std::vector<std::string> tokens;
  for (int i = 0; i < kVocab; ++i) tokens.push_back("t" + std::to_string(i));
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddUint32("llama.embedding_length", kH);
  w.AddUint32("llama.block_count", layers);
  w.AddUint32("llama.attention.head_count", kHeads);
  w.AddUint32("llama.attention.head_count_kv", kKv);
  w.AddUint32("llama.feed_forward_length", kFfn);
  w.AddUint32("llama.context_length", 128);
  w.AddFloat32("llama.rope.freq_base", 10000.0f);
  w.AddFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.AddF32Tensor("token_embd.weight", {kH, kVocab}, Fill(kH * kVocab, PlainValue));
  w.AddF32Tensor("output_norm.weight", {kH}, Fill(kH, HalfValue));
  for (int l = 0; l < layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    w.AddF32Tensor(b + "attn_norm.weight", {kH}, Fill(kH, PlainValue));
    w.AddF32Tensor(b + "attn_q.weight", {kH, kHeads * kHd}, Fill(kH * kHeads * kHd, PlainValue));
    w.AddF32Tensor(b + "attn_k.weight", {kH, kKv * kHd}, Fill(kH * kKv * kHd, NegValue));
    w.AddF32Tensor(b + "attn_v.weight", {kH, kKv * kHd}, Fill(kH * kKv * kHd, HalfValue));
    if (with_bias) {
      w.AddF32Tensor(b + "attn_q.bias", {kHeads * kHd}, Fill(kHeads * kHd, PlainValue));
      w.AddF32Tensor(b + "attn_k.bias", {kKv * kHd}, Fill(kKv * kHd, NegValue));
      w.AddF32Tensor(b + "attn_v.bias", {kKv * kHd}, Fill(kKv * kHd, HalfValue));
    }
    w.AddF32Tensor(b + "attn_output.weight", {kHeads * kHd, kH},
                   Fill(kH * kHeads * kHd, PlainValue));
    w.AddF32Tensor(b + "ffn_norm.weight", {kH}, Fill(kH, HalfValue));
    w.AddF32Tensor(b + "ffn_gate.weight", {kH, kFfn}, Fill(kH * kFfn, PlainValue));
    w.AddF32Tensor(b + "ffn_up.weight", {kH, kFfn}, Fill(kH * kFfn, NegValue));
    w.AddF32Tensor(b + "ffn_down.weight", {kFfn, kH}, Fill(kH * kFfn, PlainValue));
  }
  return w;
}

inline std::string TmpPath(const std::string& name) {
  const char* t = getenv("TEST_TMPDIR");
  return std::string(t ? t : "/tmp") + "/" + name;
}

}  // namespace rill::worker::tiny_gguf

#endif  // RILL_WORKER_MODELS_CUDA_TINY_LLAMA_GGUF_H_
