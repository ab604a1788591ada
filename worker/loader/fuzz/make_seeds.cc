// Writes small seed inputs for the fuzzers into the directories given.
// Usage: make_seeds GGUF_DIR SAFETENSORS_DIR JSON_DIR
#include <cstdio>
#include <fstream>
#include <string>

#include "worker/loader/gguf_writer.h"
#include "worker/loader/safetensors_writer.h"

using rill::loader::GgmlType;
using rill::loader::GgufValueType;
using rill::loader::GgufWriter;
using rill::loader::SafetensorsWriter;

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  {
    GgufWriter w;
    w.AddString("general.architecture", "llama");
    w.AddUint32("llama.block_count", 1);
    w.AddFloat32("llama.rope.freq_base", 10000.0f);
    w.AddBool("tokenizer.ggml.add_bos_token", true);
    w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "<s>"});
    w.AddInt32Array("tokenizer.ggml.token_type", {1, 1, 3});
    w.AddRaw("nested", GgufValueType::kArray,
             GgufWriter::EncodeArray(GgufValueType::kArray,
                                     {GgufWriter::EncodeArray(GgufValueType::kUint8, {"\x01"})}));
    w.AddF32Tensor("token_embd.weight", {2, 3}, {1, 2, 3, 4, 5, 6});
    w.AddTensor("blk.0.attn_q.weight", GgmlType::kQ8_0, {32, 1}, std::string(34, '\0'));
    (void)w.WriteFile(std::string(argv[1]) + "/seed1.gguf");
    GgufWriter w2(2);
    w2.SetAlignment(16);
    w2.AddUint64("x", 7);
    w2.AddF32Tensor("t", {1}, {1});
    (void)w2.WriteFile(std::string(argv[1]) + "/seed2.gguf");
  }
  {
    SafetensorsWriter w;
    w.AddMetadata("format", "pt");
    w.AddF32Tensor("a", {2, 2}, {1, 2, 3, 4});
    w.AddTensor("b", "BF16", {2}, std::string(4, '\0'));
    (void)w.WriteFile(std::string(argv[2]) + "/seed1.safetensors");
  }
  std::ofstream(std::string(argv[3]) + "/seed1.json")
      << R"({"a": [1, -2.5e3, true, false, null], "s": "x\u00e9\ud83d\ude00\n", "o": {"k": {}}})";
  std::ofstream(std::string(argv[3]) + "/seed2.json") << R"([[[["deep"]]], 0, 1e-7, "\\"])";
  return 0;
}
