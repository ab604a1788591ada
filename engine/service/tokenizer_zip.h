// The tokenizer artifacts VllmEngine/GetTokenizer sends: the model's
// tokenizer files packed in one zip archive (stored, uncompressed: they are
// read once by the gateway) with the archive's SHA-256, as the protocol's
// GetTokenizerChunk stream carries them.
#ifndef RILL_ENGINE_SERVICE_TOKENIZER_ZIP_H_
#define RILL_ENGINE_SERVICE_TOKENIZER_ZIP_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::engine::service {

struct ZipEntry {
  std::string name;
  std::string data;
};

// A zip archive (no compression, no directories) holding `entries`.
std::string ZipStored(const std::vector<ZipEntry>& entries);

// Lowercase hex SHA-256 of `bytes`.
std::string Sha256Hex(const std::string& bytes);

// The Hugging Face tokenizer files of the checkpoint at `model_path` (a
// directory): tokenizer.json and tokenizer_config.json, plus config.json and
// generation_config.json when present. FailedPrecondition naming what is
// missing (or when `model_path` is a file: see hf_tokenizer_files.h).
absl::StatusOr<std::vector<ZipEntry>> TokenizerArtifacts(const std::string& model_path);

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_TOKENIZER_ZIP_H_
