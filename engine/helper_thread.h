// A persistent thread that runs one task at a time beside its caller, so the
// engine loop can overlap work with the model forward (EngineCore fills the
// grammar bitmasks there) without creating a thread per step.
//
// Thread-compatible: one owner thread calls Start and Wait (the engine loop);
// the task runs on the helper thread. Every Start must be followed by a Wait
// before the next Start, and before the task's captures go out of scope.
#ifndef RILL_ENGINE_HELPER_THREAD_H_
#define RILL_ENGINE_HELPER_THREAD_H_

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace rill::engine {

class HelperThread {
 public:
  HelperThread() = default;
  // Waits for a started task, then stops and joins the thread.
  ~HelperThread();
  HelperThread(const HelperThread&) = delete;
  HelperThread& operator=(const HelperThread&) = delete;

  // Runs `task` on the helper thread (started on the first call). CHECK-fails
  // if the previous task was not waited for (a programming error).
  void Start(std::function<void()> task);
  // Blocks until the task given to the last Start has returned; returns at
  // once if none is pending.
  void Wait();

  // Tasks run so far (tests: the thread is reused, not re-created).
  int64_t tasks_run() const;

 private:
  void Loop();
  bool HasTaskOrStop() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return has_task_ || stop_; }
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !pending_; }

  mutable absl::Mutex mu_;
  std::function<void()> task_ ABSL_GUARDED_BY(mu_);
  bool has_task_ ABSL_GUARDED_BY(mu_) = false;  // task_ is set and not yet taken.
  bool pending_ ABSL_GUARDED_BY(mu_) = false;   // Started and not yet returned.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t tasks_run_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // Owner thread only.
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_HELPER_THREAD_H_
