// llama.cpp's golden tokenizations of real vocabularies, for tests: the
// vocab-only ggml-vocab-<name>.gguf files with .inp (texts separated by
// "\n__ggml_vocab_test__\n") and .out (one line of ids per text, produced by
// HF tokenizers with add_special_tokens=False) from the pinned
// llama-cpp-python sdist, which tools/fetch_llama_cpp_test_data.sh extracts
// into $RILL_MODEL_DIR/ggml-vocab.
#ifndef RILL_ENGINE_LLAMA_CPP_VOCAB_GOLDENS_H_
#define RILL_ENGINE_LLAMA_CPP_VOCAB_GOLDENS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::engine::testing {

struct Golden {
  std::string text;
  std::vector<int32_t> ids;
};

// $RILL_MODEL_DIR/ggml-vocab/ggml-vocab-<name>.gguf (it may not exist).
std::string LlamaCppVocabPath(const std::string& name);

// The goldens of the GGUF at `gguf_path` (from gguf_path + ".inp" / ".out"),
// read as llama.cpp's tests/test-tokenizer-0.cpp reads them. NotFound when
// they are missing, DataLoss when their counts of texts and lines differ.
absl::StatusOr<std::vector<Golden>> ReadLlamaCppGoldens(const std::string& gguf_path);

// "deepseek-llm" -> "deepseek_llm" (gtest names are alphanumeric).
std::string GtestName(std::string name);

}  // namespace rill::engine::testing

#endif  // RILL_ENGINE_LLAMA_CPP_VOCAB_GOLDENS_H_
