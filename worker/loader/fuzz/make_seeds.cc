// Writes the seed corpora of the loader fuzzers (checked in under corpus/).
// Usage: make_seeds OUT_DIR   (writes OUT_DIR/{gguf,safetensors,json}/*)
// Regenerate with: bazel run //worker/loader/fuzz:make_seeds -- $PWD/worker/loader/fuzz/corpus
// Seeds are small valid files covering each value type, tensor type and
// header feature once, so mutations start from every parser branch.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tools/fuzz/seed_maker.h"
#include "worker/loader/gguf_writer.h"
#include "worker/loader/safetensors_writer.h"

namespace {

using rill::fuzz::WriteSeed;

using rill::kernels::cpu::GgmlType;
using rill::worker::loader::GgufValueType;
using rill::worker::loader::GgufWriter;
using rill::worker::loader::SafetensorsWriter;

void GgufSeeds(const std::string& dir) {
  {
    GgufWriter w;
    w.AddString("general.architecture", "llama");
    w.AddUint32("llama.block_count", 1);
    w.AddFloat32("llama.rope.freq_base", 10000.0f);
    w.AddBool("tokenizer.ggml.add_bos_token", true);
    w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "<s>"});
    w.AddFloat32Array("tokenizer.ggml.scores", {0.0f, -1.0f, 0.0f});
    w.AddInt32Array("tokenizer.ggml.token_type", {1, 1, 3});
    w.AddRaw("nested", GgufValueType::kArray,
             GgufWriter::EncodeArray(GgufValueType::kArray,
                                     {GgufWriter::EncodeArray(GgufValueType::kUint8, {"\x01"})}));
    w.AddF32Tensor("token_embd.weight", {2, 3}, {1, 2, 3, 4, 5, 6});
    w.AddTensor("blk.0.attn_q.weight", GgmlType::kQ8_0, {32, 1}, std::string(34, '\0'));
    WriteSeed(dir, "llama_like.gguf", w.Build());
  }
  {
    GgufWriter w(2);
    w.SetAlignment(16);
    w.AddUint64("x", 7);
    w.AddF32Tensor("t", {1}, {1});
    WriteSeed(dir, "v2_align16.gguf", w.Build());
  }
  {  // Every scalar type once.
    GgufWriter w;
    w.AddUint8("u8", 200);
    w.AddInt8("i8", -100);
    w.AddUint16("u16", 60000);
    w.AddInt16("i16", -30000);
    w.AddUint32("u32", 4000000000u);
    w.AddInt32("i32", -2000000000);
    w.AddUint64("u64", 1ull << 40);
    w.AddInt64("i64", -(1ll << 40));
    w.AddFloat32("f32", 1.5f);
    w.AddFloat64("f64", -2.25);
    w.AddBool("b", false);
    w.AddString("s", "h\xc3\xa9llo");
    WriteSeed(dir, "scalars.gguf", w.Build());
  }
  {  // Empty file body: header only.
    GgufWriter w;
    WriteSeed(dir, "empty.gguf", w.Build());
  }
  {
    GgufWriter w(2);
    WriteSeed(dir, "empty_v2.gguf", w.Build());
  }
  {  // Empty arrays and strings.
    GgufWriter w;
    w.AddStringArray("empty_strs", {});
    w.AddInt32Array("empty_ints", {});
    w.AddString("empty_str", "");
    WriteSeed(dir, "empty_values.gguf", w.Build());
  }
  {  // Deeply nested arrays, close to the parser's limit.
    std::string v = GgufWriter::EncodeArray(GgufValueType::kInt32, {std::string("\x05\0\0\0", 4)});
    for (int i = 0; i < 14; ++i) v = GgufWriter::EncodeArray(GgufValueType::kArray, {v});
    GgufWriter w;
    w.AddRaw("deep", GgufValueType::kArray, v);
    WriteSeed(dir, "deep_nesting.gguf", w.Build());
  }
  // One tensor of each type the reader knows (one block each).
  struct T {
    const char* name;
    GgmlType type;
    int64_t elems;
    size_t bytes;
  };
  const T kTypes[] = {
      {"f32", GgmlType::kF32, 4, 16},      {"f16", GgmlType::kF16, 4, 8},
      {"bf16", GgmlType::kBF16, 4, 8},     {"q4_0", GgmlType::kQ4_0, 32, 18},
      {"q4_1", GgmlType::kQ4_1, 32, 20},   {"q5_0", GgmlType::kQ5_0, 32, 22},
      {"q5_1", GgmlType::kQ5_1, 32, 24},   {"q8_0", GgmlType::kQ8_0, 32, 34},
      {"q8_1", GgmlType::kQ8_1, 32, 36},   {"q2_k", GgmlType::kQ2_K, 256, 84},
      {"q3_k", GgmlType::kQ3_K, 256, 110}, {"q4_k", GgmlType::kQ4_K, 256, 144},
      {"q5_k", GgmlType::kQ5_K, 256, 176}, {"q6_k", GgmlType::kQ6_K, 256, 210},
      {"q8_k", GgmlType::kQ8_K, 256, 292}, {"i8", GgmlType::kI8, 4, 4},
      {"i16", GgmlType::kI16, 4, 8},       {"i32", GgmlType::kI32, 4, 16},
      {"i64", GgmlType::kI64, 2, 16},      {"f64", GgmlType::kF64, 2, 16},
  };
  for (const T& t : kTypes) {
    GgufWriter w;
    w.AddString("general.architecture", "test");
    w.AddTensor(absl::StrCat("w.", t.name), t.type, {t.elems}, std::string(t.bytes, '\x11'));
    WriteSeed(dir, absl::StrCat("tensor_", t.name, ".gguf"), w.Build());
  }
  {  // Several tensors with 2-D and 4-D shapes.
    GgufWriter w;
    w.AddF32Tensor("a", {2, 2}, {1, 2, 3, 4});
    w.AddF32Tensor("b", {1, 1, 1, 2}, {5, 6});
    w.AddF32Tensor("c", {3}, {7, 8, 9});
    WriteSeed(dir, "multi_tensor.gguf", w.Build());
  }
}

void SafetensorsSeeds(const std::string& dir) {
  {
    SafetensorsWriter w;
    w.AddMetadata("format", "pt");
    w.AddF32Tensor("a", {2, 2}, {1, 2, 3, 4});
    w.AddTensor("b", "BF16", {2}, std::string(4, '\0'));
    WriteSeed(dir, "f32_bf16.safetensors", w.Build());
  }
  const struct {
    const char* dtype;
    size_t elem;
  } kDtypes[] = {{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F64", 8}, {"I64", 8}, {"I32", 4},
                 {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}, {"F8_E4M3", 1}, {"XX", 1}};
  for (const auto& d : kDtypes) {
    SafetensorsWriter w;
    w.AddTensor("t", d.dtype, {3}, std::string(3 * d.elem, '\x3c'));
    WriteSeed(dir, absl::StrCat("dtype_", d.dtype, ".safetensors"), w.Build());
  }
  {
    SafetensorsWriter w;
    WriteSeed(dir, "empty.safetensors", w.Build());
  }
  {
    SafetensorsWriter w;
    w.AddTensor("scalar", "F32", {}, std::string(4, '\0'));
    w.AddTensor("zero", "F32", {0, 4}, "");
    WriteSeed(dir, "scalar_and_empty.safetensors", w.Build());
  }
  {
    SafetensorsWriter w;
    w.AddMetadata("format", "pt");
    w.AddMetadata("note", "\xe2\x82\xac " R"(\\ \"q\")");  // Already JSON-escaped.
    for (int i = 0; i < 6; ++i) {
      w.AddF32Tensor(absl::StrCat("model.layers.", i, ".w"), {1, 2}, {1.0f * i, 2.0f});
    }
    WriteSeed(dir, "many_tensors.safetensors", w.Build());
  }
  // Hand-written headers: odd but valid JSON, and the classic mistakes.
  auto raw = [&](const std::string& name, const std::string& header, const std::string& data) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    WriteSeed(dir, name, out + header + data);
  };
  raw("ws_header.safetensors",
      " { \"a\" : { \"dtype\" : \"F32\" , \"shape\" : [ 1 ] , \"data_offsets\" : [ 0 , 4 ] } }  ",
      std::string(4, '\0'));
  raw("overlap.safetensors",
      R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
      R"("b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
      "abc");
  raw("gap.safetensors", R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", "xy");
  raw("bad_offsets.safetensors", R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[3,1]}})",
      "abcd");
  raw("big_shape.safetensors",
      R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", "abcd");
  raw("meta_only.safetensors", R"({"__metadata__":{"k":"v"}})", "");
}

void JsonSeeds(const std::string& dir) {
  const char* kDocs[][2] = {
      {"mixed.json",
       R"({"a": [1, -2.5e3, true, false, null], "s": "x\u00e9\ud83d\ude00\n", "o": {"k": {}}})"},
      {"nested.json", R"([[[["deep"]]], 0, 1e-7, "\\"])"},
      {"empty_obj.json", "{}"},
      {"empty_arr.json", "[]"},
      {"string.json", R"("plain")"},
      {"escapes.json", R"("\"\\\/\b\f\n\r\t\u0000\u001f\uFFFF")"},
      {"surrogates.json", R"(["\ud800\udc00", "\udbff\udfff"])"},
      {"numbers.json", "[0, -0, 1.0, 1e308, -1e-308, 18446744073709551615, -9223372036854775808]"},
      {"bigint.json", "[18446744073709551616, 9223372036854775808, 1E+2, 2e-0]"},
      {"literals.json", "[true,false,null]"},
      {"ws.json", " \t\r\n{ \"a\" :\n[ ] }\n"},
      {"utf8.json", "{\"\xe4\xbd\xa0\xe5\xa5\xbd\": \"\xf0\x9f\x98\x80\"}"},
      {"dup_keys.json", R"({"a":1,"a":2})"},
      {"tokenizer_like.json",
       R"({"version":"1.0","added_tokens":[{"id":0,"content":"<|endoftext|>","special":true}],)"
       R"("model":{"type":"BPE","vocab":{"a":1,"b":2,"ab":3},"merges":["a b"]}})"},
      {"config_like.json",
       R"({"architectures":["LlamaForCausalLM"],"hidden_size":576,"rope_theta":100000.0,)"
       R"("rope_scaling":null,"tie_word_embeddings":true,"torch_dtype":"bfloat16"})"},
  };
  for (const auto& d : kDocs) WriteSeed(dir, d[0], d[1]);
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += "[";
  for (int i = 0; i < 200; ++i) deep += "]";
  WriteSeed(dir, "deep200.json", deep);
}

}  // namespace

int main(int argc, char** argv) {
  return rill::fuzz::SeedMakerMain(argc, argv, {
                                   {"gguf", GgufSeeds},
                                   {"safetensors", SafetensorsSeeds},
                                   {"json", JsonSeeds}});
}
