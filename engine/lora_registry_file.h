// The adapters added at run time (AsyncLLMEngine::AddLora), kept in a small
// JSON file so that a restarted engine registers them again:
//   {"adapters": [{"name": "sql", "id": 1, "path": "/adapters/sql"}, ...]}
// Start-up adapters (EngineArgs::loras) are not in it: they come from the
// command line every time.
#ifndef RILL_ENGINE_LORA_REGISTRY_FILE_H_
#define RILL_ENGINE_LORA_REGISTRY_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/lora_registry.h"

namespace rill::engine {

// The adapters `path` lists; empty when the file does not exist yet.
// InvalidArgument naming the file when it is not such a document.
absl::StatusOr<std::vector<LoraRequest>> ReadLoraRegistryFile(const std::string& path);

// Replaces `path` atomically (a temporary file, fsync, rename), so a crash
// leaves the old list or the new one, never half of one.
absl::Status WriteLoraRegistryFile(const std::string& path,
                                   const std::vector<LoraRequest>& adapters);

}  // namespace rill::engine

#endif  // RILL_ENGINE_LORA_REGISTRY_FILE_H_
