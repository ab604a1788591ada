#include "base/model_dir.h"

#include <sys/stat.h>

#include <cstdlib>

namespace rill::base {

std::string DefaultModelDir() {
  const char* dir = std::getenv("RILL_MODEL_DIR");
  if (dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.cache/rill/models";
}

std::string DefaultModelFilePath() { return DefaultModelDir() + "/" + kDefaultModelFile; }

bool DefaultModelFileExists() {
  struct stat st;
  return stat(DefaultModelFilePath().c_str(), &st) == 0;
}

std::string DefaultEmbedModelPath() { return DefaultModelDir() + "/" + kDefaultEmbedModel; }

std::string LlamaVocabPath() { return DefaultModelDir() + "/" + kLlamaVocabDir; }

}  // namespace rill::base
