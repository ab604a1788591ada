#include "engine/model_path.h"

#include <cstdlib>

namespace rill::engine {

std::string ResolveModelPath(const std::string& model) {
  if (!model.empty() && model != "default") return model;
  const char* dir = std::getenv("RILL_MODEL_DIR");
  std::string base;
  if (dir != nullptr && *dir != '\0') {
    base = dir;
  } else {
    const char* home = std::getenv("HOME");
    base = std::string(home != nullptr ? home : "") + "/.cache/rill/models";
  }
  return base + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace rill::engine
