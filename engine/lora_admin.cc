#include "engine/lora_admin.h"

#include <algorithm>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "engine/lora_registry_file.h"
#include "worker/lora/lora_adapter.h"

namespace rill::engine {
namespace {

absl::Status NotSupported() {
  return absl::UnimplementedError(
      "LoRA adapters are not supported here: they need a Llama-family model at "
      "tensor_parallel_size 1");
}

}  // namespace

LoraAdmin::LoraAdmin(const EngineArgs& args, ModelExecutor* executor)
    : args_(args), executor_(executor) {
  registry_ = std::make_unique<LoraRegistry>(
      [executor, rank = args.max_lora_rank](const std::string& path, const std::string& root) {
        worker::LoraLoadOptions options;
        options.max_rank = rank;
        options.root = root;
        return executor->LoadLora(path, options);
      },
      args.max_cpu_loras);
}

absl::Status LoraAdmin::LoadStartupAdapters() {
  for (const auto& [name, path] : args_.lora.adapters) {
    absl::StatusOr<LoraInfo> added = Register(LoraRequest{name, 0, path}, "");
    if (!added.ok()) {
      return absl::Status(added.status().code(), absl::StrCat("--lora ", name, "=", path, ": ",
                                                              added.status().message()));
    }
  }
  if (!args_.lora_registry_file.empty()) RestoreFromFile();
  return absl::OkStatus();
}

absl::StatusOr<LoraInfo> LoraAdmin::Add(const LoraRequest& request) {
  if (!executor_->supports_lora()) return NotSupported();
  absl::StatusOr<std::string> path = ResolveLoraPath(args_.lora_root, request.path);
  if (!path.ok()) return path.status();
  LoraRequest resolved = request;
  resolved.path = *path;
  absl::MutexLock lock(&mu_);
  // Every file of the directory is checked against the root again as it is
  // read (a symlink inside may point anywhere).
  absl::StatusOr<LoraInfo> info = Register(resolved, args_.lora_root);
  if (info.ok()) {
    runtime_.push_back(LoraRequest{info->name, info->id, info->path});
    PersistLocked();
  }
  return info;
}

absl::StatusOr<LoraInfo> LoraAdmin::Register(const LoraRequest& request,
                                             const std::string& root) {
  if (!executor_->supports_lora()) return NotSupported();
  absl::StatusOr<LoraInfo> info = registry_->Add(request, root);
  if (info.ok()) {
    LOG(INFO) << "LoRA adapter '" << info->name << "' (id " << info->id << ", rank " << info->rank
              << ") loaded from " << info->path;
  }
  return info;
}

absl::Status LoraAdmin::Remove(const std::string& name) {
  absl::MutexLock lock(&mu_);
  absl::Status s = registry_->Remove(name);
  if (!s.ok()) return s;
  LOG(INFO) << "LoRA adapter '" << name << "' removed";
  const auto it = std::find_if(runtime_.begin(), runtime_.end(),
                               [&](const LoraRequest& r) { return r.name == name; });
  if (it != runtime_.end()) {
    runtime_.erase(it);
    PersistLocked();
  }
  return s;
}

void LoraAdmin::RestoreFromFile() {
  const std::string& file = args_.lora_registry_file;
  absl::StatusOr<std::vector<LoraRequest>> saved = ReadLoraRegistryFile(file);
  if (!saved.ok()) {
    LOG(ERROR) << saved.status() << "; no runtime LoRA adapters restored";
    return;
  }
  for (const LoraRequest& r : *saved) {
    absl::StatusOr<LoraInfo> info = Add(r);
    if (info.ok()) {
      LOG(INFO) << "LoRA adapter '" << r.name << "' restored from " << file;
    } else {
      LOG(WARNING) << "LoRA adapter '" << r.name << "' listed in " << file
                   << " was not restored: " << info.status();
    }
  }
  absl::MutexLock lock(&mu_);
  PersistLocked();  // Drops the ones that did not load.
}

void LoraAdmin::PersistLocked() {
  if (args_.lora_registry_file.empty()) return;
  // The adapter is registered either way; a lost write only costs the
  // restore after a restart, so it is logged rather than failing the call.
  if (absl::Status s = WriteLoraRegistryFile(args_.lora_registry_file, runtime_); !s.ok()) {
    LOG(ERROR) << "LoRA registry not saved: " << s;
  }
}

}  // namespace rill::engine
