// AsyncLLMEngine's LoRA administration: adapters are loaded on the caller's
// thread (never the engine loop) into the registry that Generate reads.
#include <glog/logging.h>

#include "engine/async_llm_engine.h"

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
  return AddLoraTrusted(resolved);
}

absl::StatusOr<LoraInfo> AsyncLLMEngine::AddLoraTrusted(const LoraRequest& request) {
  if (!executor_->supports_lora()) {
    return absl::UnimplementedError(
        "LoRA adapters are not supported here: they need a Llama-family model at "
        "tensor_parallel_size 1");
  }
  absl::StatusOr<LoraInfo> info = lora_->Add(request);
  if (info.ok()) {
    LOG(INFO) << "LoRA adapter '" << info->name << "' (id " << info->id << ", rank " << info->rank
              << ") loaded from " << info->path;
  }
  return info;
}

absl::Status AsyncLLMEngine::RemoveLora(const std::string& name) {
  absl::Status s = lora_->Remove(name);
  if (s.ok()) LOG(INFO) << "LoRA adapter '" << name << "' removed";
  return s;
}

}  // namespace rill::engine
