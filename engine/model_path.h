// Where "the default model" lives. Moved here from cli/model_session.cc so
// the engine and the CLI resolve models the same way.
#ifndef RILL_ENGINE_MODEL_PATH_H_
#define RILL_ENGINE_MODEL_PATH_H_

#include <string>

namespace rill::engine {

// "default" (or "") resolves to the default model in $RILL_MODEL_DIR
// (~/.cache/rill/models); anything else is a .gguf path or HF directory.
std::string ResolveModelPath(const std::string& model);

}  // namespace rill::engine

#endif  // RILL_ENGINE_MODEL_PATH_H_
