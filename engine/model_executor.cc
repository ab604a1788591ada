#include "engine/model_executor.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "base/message_text.h"

namespace rill::engine {

absl::Status NotAllowListed(const std::string& method) {
  return absl::PermissionDeniedError(absl::StrCat(
      "worker method '", ShortForMessage(method), "' is not allow-listed (allowed: ping, get_worker_info)"));
}

absl::StatusOr<std::shared_ptr<const worker::LoraAdapter>> ModelExecutor::LoadLora(
    const std::string& dir, const worker::LoraLoadOptions&) {
  return absl::UnimplementedError(absl::StrCat(
      "LoRA adapters are not supported by this executor (", dir,
      "); they run in the in-process executor (tensor_parallel_size 1) only"));
}

absl::StatusOr<std::vector<std::string>> ModelExecutor::CollectiveRpc(const std::string& method) {
  // One rank, in this process.
  if (method == "ping") return std::vector<std::string>{"\"pong\""};
  if (method == "get_worker_info") {
    return std::vector<std::string>{absl::StrCat(
        "{\"rank\":0,\"world_size\":1,\"pid\":", getpid(), ",\"threads\":", num_threads(),
        ",\"kv_cache_bytes\":", kv_cache_bytes(), ",\"communicator\":\"none\",\"process\":"
        "\"engine\"}")};
  }
  return NotAllowListed(method);
}

}  // namespace rill::engine
