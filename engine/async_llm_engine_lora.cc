// AsyncLLMEngine's LoRA administration: adapters are loaded on the caller's
// thread (never the engine loop) into the registry that Generate reads; the
// ones added at run time are kept in EngineArgs::lora_registry_file.
#include <algorithm>

#include <glog/logging.h>

#include "engine/async_llm_engine.h"
#include "engine/lora_registry_file.h"

namespace rill::engine {

absl::StatusOr<LoraInfo> AsyncLLMEngine::AddLora(const LoraRequest& request) {
  if (!executor_->supports_lora()) {
    return absl::UnimplementedError(
        "LoRA adapters are not supported here: they need a Llama-family model at "
        "tensor_parallel_size 1");
  }
  absl::StatusOr<std::string> path = ResolveLoraPath(args_.lora_root, request.path);
  if (!path.ok()) return path.status();
  LoraRequest resolved = request;
  resolved.path = *path;
  absl::MutexLock lock(&lora_admin_mu_);
  // Every file of the directory is checked against the root again as it is
  // read (a symlink inside may point anywhere).
  absl::StatusOr<LoraInfo> info = RegisterLora(resolved, args_.lora_root);
  if (info.ok()) {
    runtime_loras_.push_back(LoraRequest{info->name, info->id, info->path});
    PersistLorasLocked();
  }
  return info;
}

absl::StatusOr<LoraInfo> AsyncLLMEngine::AddLoraTrusted(const LoraRequest& request) {
  return RegisterLora(request, "");
}

absl::StatusOr<LoraInfo> AsyncLLMEngine::RegisterLora(const LoraRequest& request,
                                                      const std::string& root) {
  if (!executor_->supports_lora()) {
    return absl::UnimplementedError(
        "LoRA adapters are not supported here: they need a Llama-family model at "
        "tensor_parallel_size 1");
  }
  absl::StatusOr<LoraInfo> info = lora_->Add(request, root);
  if (info.ok()) {
    LOG(INFO) << "LoRA adapter '" << info->name << "' (id " << info->id << ", rank " << info->rank
              << ") loaded from " << info->path;
  }
  return info;
}

absl::Status AsyncLLMEngine::RemoveLora(const std::string& name) {
  absl::MutexLock lock(&lora_admin_mu_);
  absl::Status s = lora_->Remove(name);
  if (!s.ok()) return s;
  LOG(INFO) << "LoRA adapter '" << name << "' removed";
  const auto it = std::find_if(runtime_loras_.begin(), runtime_loras_.end(),
                               [&](const LoraRequest& r) { return r.name == name; });
  if (it != runtime_loras_.end()) {
    runtime_loras_.erase(it);
    PersistLorasLocked();
  }
  return s;
}

void AsyncLLMEngine::RestoreLoras() {
  const std::string& file = args_.lora_registry_file;
  absl::StatusOr<std::vector<LoraRequest>> saved = ReadLoraRegistryFile(file);
  if (!saved.ok()) {
    LOG(ERROR) << saved.status() << "; no runtime LoRA adapters restored";
    return;
  }
  for (const LoraRequest& r : *saved) {
    absl::StatusOr<LoraInfo> info = AddLora(r);
    if (info.ok()) {
      LOG(INFO) << "LoRA adapter '" << r.name << "' restored from " << file;
    } else {
      LOG(WARNING) << "LoRA adapter '" << r.name << "' listed in " << file
                   << " was not restored: " << info.status();
    }
  }
  absl::MutexLock lock(&lora_admin_mu_);
  PersistLorasLocked();  // Drops the ones that did not load.
}

void AsyncLLMEngine::PersistLorasLocked() {
  if (args_.lora_registry_file.empty()) return;
  // The adapter is registered either way; a lost write only costs the
  // restore after a restart, so it is logged rather than failing the call.
  if (absl::Status s = WriteLoraRegistryFile(args_.lora_registry_file, runtime_loras_); !s.ok()) {
    LOG(ERROR) << "LoRA registry not saved: " << s;
  }
}

}  // namespace rill::engine
