#include "engine/lora_registry.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "worker/lora/lora_adapter.h"

namespace rill::engine {

namespace fs = std::filesystem;

absl::StatusOr<std::string> ResolveLoraPath(const std::string& root, const std::string& path) {
  if (root.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "LoRA path ", path,
        " refused: loading adapters at run time is off (start the engine with --lora_root=DIR)"));
  }
  std::error_code ec;
  const fs::path canonical_root = fs::canonical(root, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("--lora_root ", root, " cannot be resolved: ", ec.message()));
  }
  // Relative paths are relative to the root, not to the engine's directory.
  const fs::path p = fs::path(path).is_absolute() ? fs::path(path) : canonical_root / path;
  auto under = [](const fs::path& candidate, const fs::path& dir) {
    const std::string c = candidate.string(), r = dir.string();
    return c == r || (c.size() > r.size() && c.compare(0, r.size(), r) == 0 &&
                      (r.back() == '/' || c[r.size()] == '/'));
  };
  // Lexically first (against the root as given or resolved), so a path
  // outside the root is refused without saying whether it exists.
  const fs::path lexical = p.lexically_normal();
  if (!under(lexical, fs::absolute(root).lexically_normal()) && !under(lexical, canonical_root)) {
    return absl::PermissionDeniedError(
        absl::StrCat("LoRA path ", path, " is outside the allowed root ", canonical_root.string()));
  }
  const fs::path resolved = fs::canonical(p, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("LoRA path ", path, " does not exist"));
  if (!under(resolved, canonical_root)) {
    return absl::PermissionDeniedError(
        absl::StrCat("LoRA path ", path, " resolves to ", resolved.string(),
                     ", outside the allowed root ", canonical_root.string()));
  }
  return resolved.string();
}

LoraRegistry::LoraRegistry(Loader loader, int max_loaded)
    : loader_(std::move(loader)), max_loaded_(std::max(1, max_loaded)) {}

absl::StatusOr<LoraInfo> LoraRegistry::Add(const LoraRequest& request, const std::string& root) {
  if (request.name.empty()) return absl::InvalidArgumentError("LoRA adapter name is empty");
  if (request.id < 0) {
    return absl::InvalidArgumentError(absl::StrCat("LoRA id must be positive, got ", request.id));
  }
  auto check_free = [&]() -> absl::Status {
    if (entries_.contains(request.name)) {
      return absl::AlreadyExistsError(
          absl::StrCat("a LoRA adapter named '", request.name, "' is already loaded"));
    }
    if (request.id > 0) {
      for (const auto& [name, e] : entries_) {
        if (e.info.id == request.id) {
          return absl::AlreadyExistsError(
              absl::StrCat("LoRA id ", request.id, " is already used by '", name, "'"));
        }
      }
    }
    return absl::OkStatus();
  };
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = check_free(); !s.ok()) return s;
  }
  absl::StatusOr<std::shared_ptr<const worker::LoraAdapter>> adapter = loader_(request.path, root);
  if (!adapter.ok()) return adapter.status();
  absl::MutexLock lock(&mu_);
  if (absl::Status s = check_free(); !s.ok()) return s;  // A concurrent Add won.
  Entry e;
  e.info.name = request.name;
  e.info.id = request.id > 0 ? request.id : next_id_;
  next_id_ = std::max(next_id_, e.info.id) + 1;
  e.info.path = request.path;
  e.root = root;
  e.info.rank = (*adapter)->rank;
  e.handle = LoraHandle{*adapter, next_key_++};
  LoraInfo info = e.info;
  entries_[request.name] = std::move(e);
  lru_.push_front(request.name);
  EvictLocked();
  info.loaded = entries_[request.name].handle.adapter != nullptr;
  return info;
}

absl::Status LoraRegistry::Remove(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("no LoRA adapter named '", name, "'"));
  }
  entries_.erase(it);
  lru_.remove(name);
  return absl::OkStatus();
}

std::vector<LoraInfo> LoraRegistry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<LoraInfo> out;
  for (const auto& [name, e] : entries_) {
    out.push_back(e.info);
    out.back().loaded = e.handle.adapter != nullptr;
  }
  std::sort(out.begin(), out.end(),
            [](const LoraInfo& a, const LoraInfo& b) { return a.id < b.id; });
  return out;
}

absl::StatusOr<LoraHandle> LoraRegistry::Acquire(const std::string& name) {
  std::string path, root;
  int64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrCat("LoRA adapter '", name, "' is not loaded"));
    }
    if (it->second.handle.adapter != nullptr) {
      TouchLocked(name);
      return it->second.handle;
    }
    path = it->second.info.path;
    root = it->second.root;
    id = it->second.info.id;
  }
  // Evicted: reload outside the lock.
  absl::StatusOr<std::shared_ptr<const worker::LoraAdapter>> adapter = loader_(path, root);
  if (!adapter.ok()) {
    return absl::Status(adapter.status().code(), absl::StrCat("reloading LoRA adapter '", name,
                                                              "': ", adapter.status().message()));
  }
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second.info.id != id) {
    return absl::NotFoundError(absl::StrCat("LoRA adapter '", name, "' was removed"));
  }
  if (it->second.handle.adapter == nullptr) {
    it->second.handle = LoraHandle{*adapter, next_key_++};
    lru_.push_front(name);
  } else {
    TouchLocked(name);  // A concurrent Acquire reloaded it first.
  }
  LoraHandle handle = it->second.handle;
  EvictLocked();
  return handle;
}

int LoraRegistry::num_loaded() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(lru_.size());
}

void LoraRegistry::TouchLocked(const std::string& name) {
  lru_.remove(name);
  lru_.push_front(name);
}

void LoraRegistry::EvictLocked() {
  while (static_cast<int>(lru_.size()) > max_loaded_) {
    auto it = entries_.find(lru_.back());
    if (it != entries_.end()) it->second.handle.adapter = nullptr;
    lru_.pop_back();
  }
}

}  // namespace rill::engine
