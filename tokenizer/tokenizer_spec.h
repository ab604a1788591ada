// Plain description of a tokenizer, filled from GGUF metadata or an HF
// tokenizer.json by whoever loads the model. Kept free of any file format so
// the tokenizer does not depend on a loader.
#ifndef RILL_TOKENIZER_TOKENIZER_SPEC_H_
#define RILL_TOKENIZER_TOKENIZER_SPEC_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace rill::tokenizer {

// Token types, numbered as GGUF tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // Special tokens (<|im_start|>, <s>): skipped by
                     // Decode(skip_special_tokens=true).
  kUserDefined = 4,  // Added tokens that are not special.
  kUnused = 5,
  kByte = 6,         // SentencePiece byte-fallback tokens <0xXX>.
};

struct TokenizerSpec {
  // "gpt2": byte-level BPE (GPT-2 byte-to-unicode alphabet, merge ranks).
  // "llama": SentencePiece-style BPE ('▁' marks spaces, byte fallback);
  //          merges by rank if `merges` is non-empty (HF), else by score
  //          (llama.cpp / GGUF).
  // "gemma4": as "llama" by merge rank, without a space prefix, where runs
  //          of '\n' are words of their own (llama.cpp's "gemma4").
  std::string model = "gpt2";
  std::vector<std::string> tokens;    // Id -> token text.
  std::vector<int32_t> token_types;   // Empty: all kNormal.
  std::vector<std::string> merges;    // "left right", highest priority first.
  std::vector<float> scores;          // SentencePiece scores (may be empty).
  // GGUF tokenizer.ggml.pre ("gpt2", "smollm", "llama-bpe", "qwen2",
  // "default", ...: pre_tokenizer.h); ignored for "llama" and "gemma4".
  std::string pre = "default";
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t pad_id = -1;
  int32_t unk_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = true;  // "llama" only: prepend '▁' to each text run.
  bool byte_fallback = true;     // "llama" only: unknown chars -> <0xXX>.
  std::string chat_template;
  // Templates by name besides the default one (GGUF tokenizer.chat_templates
  // + tokenizer.chat_template.<name>, a tokenizer_config.json list of
  // {name, template}): command-r's "tool_use" and "rag". As in transformers,
  // a request that passes tools renders "tool_use" when there is one.
  std::map<std::string, std::string> named_chat_templates;
};

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_TOKENIZER_SPEC_H_
