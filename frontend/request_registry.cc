#include "frontend/request_registry.h"

namespace rill::frontend {

std::string RequestRegistry::FinishedKey(const std::string& peer, const std::string& id) {
  // Ids are valid UTF-8 (checked at parse), so they never hold a NUL.
  std::string key = peer;
  key.push_back('\0');
  key += id;
  return key;
}

bool RequestRegistry::Claim(const std::string& id, Running owner) {
  absl::MutexLock l(&mu_);
  return running_.emplace(id, std::move(owner)).second;
}

void RequestRegistry::Release(const std::string& id, const std::string& engine_id,
                              rill::v1::RequestState final_state) {
  absl::MutexLock l(&mu_);
  auto it = running_.find(id);
  if (it == running_.end() || it->second.engine_id != engine_id) return;
  std::string key = FinishedKey(it->second.peer, id);
  running_.erase(it);
  auto [pos, inserted] = finished_.insert_or_assign(key, final_state);
  if (!inserted) return;  // Already in finished_order_.
  finished_order_.push_back(std::move(key));
  if (finished_order_.size() > kMaxFinished) {
    finished_.erase(finished_order_.front());
    finished_order_.pop_front();
  }
}

std::optional<RequestRegistry::Running> RequestRegistry::FindRunning(
    const std::string& id, const std::string& peer) const {
  absl::MutexLock l(&mu_);
  auto it = running_.find(id);
  if (it == running_.end() || it->second.peer != peer) return std::nullopt;
  return it->second;
}

std::optional<rill::v1::RequestState> RequestRegistry::FindFinished(
    const std::string& id, const std::string& peer) const {
  absl::MutexLock l(&mu_);
  auto it = finished_.find(FinishedKey(peer, id));
  if (it == finished_.end()) return std::nullopt;
  return it->second;
}

}  // namespace rill::frontend
