#include "engine/helper_thread.h"

#include <utility>

#include <glog/logging.h>

namespace rill::engine {

HelperThread::~HelperThread() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    // The loop finishes a pending task before it sees stop_.
    stop_ = true;
  }
  thread_.join();
}

void HelperThread::Start(std::function<void()> task) {
  {
    absl::MutexLock lock(&mu_);
    CHECK(!pending_) << "HelperThread::Start before Wait of the previous task";
    task_ = std::move(task);
    has_task_ = true;
    pending_ = true;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void HelperThread::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &HelperThread::Idle));
}

int64_t HelperThread::tasks_run() const {
  absl::MutexLock lock(&mu_);
  return tasks_run_;
}

void HelperThread::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &HelperThread::HasTaskOrStop));
      if (!has_task_) return;  // stop_ with nothing left to run.
      task = std::move(task_);
      task_ = nullptr;
      has_task_ = false;
    }
    task();
    task = nullptr;  // Its captures go before Wait returns.
    absl::MutexLock lock(&mu_);
    pending_ = false;
    ++tasks_run_;
  }
}

}  // namespace rill::engine
