// The engine's LoRA adapters: registered by name (at start-up or through
// AddLora), loaded into memory on first use and kept in an LRU of at most
// max_cpu_loras loaded adapters. A request holds its adapter (shared_ptr)
// from Generate to its end, so RemoveLora and eviction never pull weights
// from under a running sequence; an evicted adapter is reloaded from its
// path by the next request that names it.
//
// Thread-safe. Loading (file I/O) runs on the calling thread (AddLora /
// Generate callers), never on the engine loop, and outside the lock.
#ifndef RILL_ENGINE_LORA_REGISTRY_H_
#define RILL_ENGINE_LORA_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace rill::worker {
struct LoraAdapter;
}

namespace rill::engine {

// vLLM's LoRARequest: an adapter by name, a positive integer id (0: the
// registry assigns one) and the PEFT directory.
struct LoraRequest {
  std::string name;
  int64_t id = 0;
  std::string path;
};

struct LoraInfo {
  std::string name;
  int64_t id = 0;
  std::string path;
  int rank = 0;
  bool loaded = false;  // In memory now (else reloaded on next use).
};

// What a request runs with: the weights and the prefix-cache key. The key
// is fresh for every load, so blocks cached under one load of an adapter
// are never reused by another adapter, or by the same name re-added with
// other weights.
struct LoraHandle {
  std::shared_ptr<const worker::LoraAdapter> adapter;
  uint64_t cache_key = 0;
};

// Is `path` under `root`? Returns the canonical path (symlinks and ".."
// resolved) when it is; PermissionDenied naming the path when it is not or
// `root` is empty; NotFound when it does not exist.
absl::StatusOr<std::string> ResolveLoraPath(const std::string& root, const std::string& path);

class LoraRegistry {
 public:
  // Loads the adapter at `path`; `root` non-empty: every file it reads must
  // resolve under it (worker::LoraLoadOptions::root).
  using Loader = std::function<absl::StatusOr<std::shared_ptr<const worker::LoraAdapter>>(
      const std::string& path, const std::string& root)>;
  // `max_loaded` >= 1 adapters stay in memory (the LRU's capacity).
  LoraRegistry(Loader loader, int max_loaded);

  // Loads and registers. `root`: passed to the loader now and on every
  // reload (empty for trusted start-up adapters). InvalidArgument for an
  // empty name or a negative id; AlreadyExists for a name or id in use; the
  // loader's error otherwise (nothing is registered then).
  absl::StatusOr<LoraInfo> Add(const LoraRequest& request, const std::string& root = "");
  // NotFound when no adapter has that name. Running requests keep theirs.
  absl::Status Remove(const std::string& name);
  std::vector<LoraInfo> List() const;  // By id.
  // The adapter for a request (reloading it if evicted) and marks it most
  // recently used. NotFound naming the adapter when not registered.
  absl::StatusOr<LoraHandle> Acquire(const std::string& name);
  int num_loaded() const;

 private:
  struct Entry {
    LoraInfo info;
    std::string root;
    LoraHandle handle;  // adapter null when evicted.
  };
  // Drops the least recently used loaded adapters beyond capacity.
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TouchLocked(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Loader loader_;
  const int max_loaded_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);  // Loaded names, most recent first.
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_key_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_LORA_REGISTRY_H_
