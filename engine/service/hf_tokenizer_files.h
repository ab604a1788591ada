// A Hugging Face tokenizer.json + tokenizer_config.json written from a
// TokenizerSpec (what a GGUF checkpoint carries), so a gateway that builds
// its tokenizer from HF files (VllmEngine/GetTokenizer) tokenizes exactly as
// Rill does. Covers the byte-level BPE pipelines Rill reads from
// tokenizer.json the other way (tokenizer/tokenizer_json.h): pre "gpt2" /
// "default" and "smollm"; others are Unimplemented.
#ifndef RILL_ENGINE_SERVICE_HF_TOKENIZER_FILES_H_
#define RILL_ENGINE_SERVICE_HF_TOKENIZER_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/service/tokenizer_zip.h"
#include "tokenizer/tokenizer_spec.h"

namespace rill::engine::service {

// {tokenizer.json, tokenizer_config.json}; the config carries the chat
// template, the special tokens and model_max_length = `max_model_len`.
absl::StatusOr<std::vector<ZipEntry>> HfTokenizerFilesFromSpec(const tokenizer::TokenizerSpec& spec,
                                                               int64_t max_model_len);

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_HF_TOKENIZER_FILES_H_
