#include "engine/model_path.h"

#include "base/model_dir.h"

namespace rill::engine {

std::string ResolveModelPath(const std::string& model) {
  if (!model.empty() && model != "default") return model;
  return base::DefaultModelFilePath();
}

}  // namespace rill::engine
