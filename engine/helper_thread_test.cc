#include "engine/helper_thread.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"

namespace rill::engine {
namespace {

TEST(HelperThreadTest, WaitWithoutStartReturnsAtOnce) {
  HelperThread helper;
  helper.Wait();
  EXPECT_EQ(helper.tasks_run(), 0);
}

TEST(HelperThreadTest, RunsEveryTaskOnOneReusedThread) {
  HelperThread helper;
  std::thread::id first;
  for (int i = 0; i < 100; ++i) {
    std::thread::id ran_on;
    helper.Start([&ran_on] { ran_on = std::this_thread::get_id(); });
    helper.Wait();
    ASSERT_NE(ran_on, std::this_thread::get_id());
    if (i == 0) first = ran_on;
    EXPECT_EQ(ran_on, first) << "task " << i << " ran on a new thread";
  }
  EXPECT_EQ(helper.tasks_run(), 100);
}

// The task runs while the caller works (what EngineCore overlaps with the
// forward): it can wait for the caller, and Wait waits for it.
TEST(HelperThreadTest, TaskOverlapsTheCallerAndWaitWaitsForIt) {
  HelperThread helper;
  absl::Notification caller_working;
  std::atomic<bool> task_done{false};
  helper.Start([&] {
    caller_working.WaitForNotification();
    task_done = true;
  });
  caller_working.Notify();  // Would deadlock if Start ran the task inline.
  helper.Wait();
  EXPECT_TRUE(task_done);
}

TEST(HelperThreadTest, DestructorFinishesAStartedTask) {
  std::atomic<bool> task_done{false};
  {
    HelperThread helper;
    helper.Start([&task_done] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      task_done = true;
    });
  }
  EXPECT_TRUE(task_done);
}

TEST(HelperThreadDeathTest, StartBeforeWaitIsAProgrammingError) {
  EXPECT_DEATH(
      {
        HelperThread helper;
        absl::Notification release;
        helper.Start([&release] { release.WaitForNotification(); });
        helper.Start([] {});
      },
      "before Wait");
}

}  // namespace
}  // namespace rill::engine
