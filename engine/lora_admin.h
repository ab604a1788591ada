// LoRA administration of an engine: adapters are loaded on the caller's
// thread (never the engine loop) into the registry that Generate reads; the
// ones added at run time are listed in EngineArgs::lora_registry_file and
// registered again when an engine starts. Thread-safe.
#ifndef RILL_ENGINE_LORA_ADMIN_H_
#define RILL_ENGINE_LORA_ADMIN_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/engine_args.h"
#include "engine/lora_registry.h"
#include "engine/model_executor.h"

namespace rill::engine {

class LoraAdmin {
 public:
  // `executor` loads the adapters and must outlive this.
  LoraAdmin(const EngineArgs& args, ModelExecutor* executor);

  // Adds the start-up adapters (EngineArgs::loras; any path), then restores
  // the registry file's. A start-up adapter that fails is an error naming it.
  absl::Status LoadStartupAdapters();

  // PermissionDenied for a path outside EngineArgs::lora_root (or with no
  // root), Unimplemented when the executor cannot run adapters,
  // AlreadyExists for a used name or id, the loader's error for a bad adapter.
  absl::StatusOr<LoraInfo> Add(const LoraRequest& request);
  // Running requests of the adapter finish with it.
  absl::Status Remove(const std::string& name);
  std::vector<LoraInfo> List() const { return registry_->List(); }
  // For Generate: the adapter (reloaded if evicted: file I/O on this thread).
  absl::StatusOr<LoraHandle> Acquire(const std::string& name) { return registry_->Acquire(name); }

 private:
  // Registers and logs; `root` confines the adapter's files ("" for trusted).
  absl::StatusOr<LoraInfo> Register(const LoraRequest& request, const std::string& root);
  void RestoreFromFile();
  void PersistLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const EngineArgs args_;
  ModelExecutor* const executor_;
  std::unique_ptr<LoraRegistry> registry_;
  // Serializes Add/Remove with the rewrite of the registry file, so the file
  // lists exactly the runtime adapters that are registered.
  absl::Mutex mu_;
  std::vector<LoraRequest> runtime_ ABSL_GUARDED_BY(mu_);  // In Add order.
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_LORA_ADMIN_H_
