// Where Rill's models live on this machine, resolved in this one place for
// the engine, the CLI, the benches and the tests.
#ifndef RILL_BASE_MODEL_DIR_H_
#define RILL_BASE_MODEL_DIR_H_

#include <string>

namespace rill::base {

// The default model's file name inside DefaultModelDir(); tools/setup.sh
// puts it there.
inline constexpr char kDefaultModelFile[] = "SmolLM2-135M-Instruct.Q4_1.gguf";

// $RILL_MODEL_DIR when set and non-empty, else $HOME/.cache/rill/models.
// Reads the environment on every call (tests set it).
std::string DefaultModelDir();

// DefaultModelDir()/kDefaultModelFile; the file may not exist.
std::string DefaultModelFilePath();

// Whether DefaultModelFilePath() exists (tests that need the model skip
// without it; tools/setup.sh downloads it).
bool DefaultModelFileExists();

// The default embedding model's HF directory inside DefaultModelDir()
// (tools/fetch_embed_model.sh puts it there).
inline constexpr char kDefaultEmbedModel[] = "all-MiniLM-L6-v2";

// DefaultModelDir()/kDefaultEmbedModel; the directory may not exist.
std::string DefaultEmbedModelPath();

// llama.cpp's vocab-only GGUFs with golden tokenizations
// (ggml-vocab-*.gguf{,.inp,.out}) inside DefaultModelDir()
// (tools/fetch_llama_cpp_test_data.sh puts them there).
inline constexpr char kLlamaVocabDir[] = "ggml-vocab";

// DefaultModelDir()/kLlamaVocabDir; the directory may not exist.
std::string LlamaVocabPath();

}  // namespace rill::base

#endif  // RILL_BASE_MODEL_DIR_H_
