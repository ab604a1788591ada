#include "engine/engine_stats.h"

#include <algorithm>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rill::engine {

EngineStats EngineStatsReporter::WithRates(EngineStats s) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  const double dt = std::max(1e-9, absl::ToDoubleSeconds(now - last_rated_time_));
  s.prompt_tokens_per_second = (s.prompt_tokens - last_rated_.prompt_tokens) / dt;
  s.generation_tokens_per_second = (s.generation_tokens - last_rated_.generation_tokens) / dt;
  last_rated_ = s;
  last_rated_time_ = now;
  return s;
}

EngineStats EngineStatsReporter::Log(const EngineStats& s) {
  std::vector<std::pair<std::string, StatLogger>> loggers;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    const double dt = std::max(1e-9, absl::ToDoubleSeconds(now - last_logged_time_));
    LOG(INFO) << absl::StrFormat(
        "engine: %d running, %d waiting, KV cache %.1f%% used, prefix cache hit rate %.1f%%, "
        "prompt %.1f tokens/s, generation %.1f tokens/s, %d preemptions",
        s.num_running, s.num_waiting, 100.0 * s.kv_usage, 100.0 * s.prefix_cache_hit_rate,
        (s.prompt_tokens - last_logged_.prompt_tokens) / dt,
        (s.generation_tokens - last_logged_.generation_tokens) / dt, s.preemptions);
    last_logged_ = s;
    last_logged_time_ = now;
    loggers = loggers_;
  }
  // Outside the lock: a logger may call back into the engine.
  for (const auto& entry : loggers) entry.second(s);
  return s;
}

absl::Status EngineStatsReporter::AddLogger(const std::string& name, StatLogger logger) {
  if (!logger) return absl::InvalidArgumentError("logger must not be empty");
  absl::MutexLock lock(&mu_);
  for (const auto& entry : loggers_) {
    if (entry.first == name) {
      return absl::AlreadyExistsError(absl::StrCat("a logger named '", name, "' exists"));
    }
  }
  loggers_.emplace_back(name, std::move(logger));
  return absl::OkStatus();
}

absl::Status EngineStatsReporter::RemoveLogger(const std::string& name) {
  absl::MutexLock lock(&mu_);
  for (auto it = loggers_.begin(); it != loggers_.end(); ++it) {
    if (it->first == name) {
      loggers_.erase(it);
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(absl::StrCat("no logger named '", name, "'"));
}

}  // namespace rill::engine
