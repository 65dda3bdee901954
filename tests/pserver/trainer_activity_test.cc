// TrainerActivity alone: the async loop's wait ends when every trainer has
// completed or the server stops (at once on Wake), and fails naming the
// trainers that went silent for the idle bound — not one that keeps
// sending, nor one that completed.
#include "pserver/trainer_activity.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace oar {
namespace {

TEST(TrainerActivityTest, TheWaitEndsWhenEveryTrainerCompleted) {
  TrainerActivity a(3);
  EXPECT_TRUE(a.Complete(1));
  EXPECT_FALSE(a.Complete(1));  // a retried COMPLETE
  std::thread others([&] {
    a.Complete(0);
    a.Complete(2);
  });
  EXPECT_TRUE(a.AwaitAllCompleted(absl::Seconds(60), [] { return false; }).ok());
  others.join();
  EXPECT_EQ(a.completed(), (std::set<int>{0, 1, 2}));
  EXPECT_TRUE(a.completed(2));
}

TEST(TrainerActivityTest, ASilentTrainerFailsTheWaitByNameAndAHeardOneDoesNot) {
  TrainerActivity a(3);
  a.Complete(0);
  std::atomic<bool> done{false};
  std::thread talker([&] {  // trainer 2 keeps sending
    while (!done.load()) {
      a.Heard(2);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  absl::Status s = a.AwaitAllCompleted(absl::Seconds(1), [] { return false; });
  done = true;
  talker.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(s.message().find("trainer(s) 1 sent nothing for"), std::string::npos) << s;
}

TEST(TrainerActivityTest, AStopEndsTheWaitCleanly) {
  TrainerActivity a(2);
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    stopped = true;
    a.Wake();
  });
  EXPECT_TRUE(a.AwaitAllCompleted(absl::Seconds(60), [&] { return stopped.load(); }).ok());
  stopper.join();
  EXPECT_TRUE(a.completed().empty());
}

}  // namespace
}  // namespace oar
