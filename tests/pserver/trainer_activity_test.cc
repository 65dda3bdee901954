// TrainerActivity alone: the async loop's wait ends when every trainer has
// completed or the server stops (at once on Wake), and fails naming the
// trainers that went silent for the idle bound — not one that keeps
// sending, nor one that completed. An elastic job's wait (set_members)
// ends once every member completed or left, and is bounded when fewer
// trainers than the job's minimum are there; a member replaced on its id
// is a leave and a join.
#include "pserver/trainer_activity.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "pserver/pserver_metrics.h"

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

TEST(TrainerActivityTest, AnElasticJobLeftBelowItsMinimumStopsWithTheReasonAfterTheBound) {
  TrainerActivity a(4);
  absl::Mutex mu;
  TrainerMembers now{.live = {0, 1, 2}, .ever = {0, 1, 2}, .min = 2};
  a.set_members([&] {
    absl::MutexLock l(&mu);
    return now;
  });
  std::thread deaths([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    absl::MutexLock l(&mu);
    now.live = {0};  // two leave: one is left, of the two the job needs
  });
  const absl::Time start = absl::Now();
  absl::Status s = a.AwaitAllCompleted(absl::Seconds(1), [] { return false; });
  deaths.join();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("left with 1 trainer(s)"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--trainers 2:4"), std::string::npos) << s;
  EXPECT_GE(absl::Now() - start, absl::Seconds(1.3));  // not before the bound
}

TEST(TrainerActivityTest, AJoinerBeforeTheBoundKeepsAnElasticJobBelowItsMinimumGoing) {
  TrainerActivity a(3);
  absl::Mutex mu;
  TrainerMembers now{.live = {0}, .ever = {0, 1}, .min = 2};
  a.set_members([&] {
    absl::MutexLock l(&mu);
    return now;
  });
  std::thread job([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    {
      absl::MutexLock l(&mu);
      now.live = {0, 2};
      now.ever = {0, 1, 2};
    }
    for (int t : {0, 2}) a.Complete(t);
    a.Wake();
  });
  absl::Status s = a.AwaitAllCompleted(absl::Seconds(2), [] { return false; });
  job.join();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(a.completed(), (std::set<int>{0, 2}));
}

// A trainer that died and was replaced on its id between two looks at the
// member list (the new process's entry has another value) is counted as a
// leave and a join; one that only stays is not.
TEST(TrainerActivityTest, AMemberReplacedOnItsIdBetweenTwoLooksIsALeaveAndAJoin) {
  TrainerActivity a(2);
  absl::Mutex mu;
  int looks = 0;  // how often the activity read the list
  TrainerMembers now{.live = {0, 1}, .ever = {0, 1}, .min = 1, .values = {{0, "h pid 10"}, {1, "h pid 11"}}};
  a.set_members([&] {
    absl::MutexLock l(&mu);
    ++looks;
    return now;
  });
  auto looked = [&](int n) {  // waits for the activity's n-th read, without a timed guess
    absl::MutexLock l(&mu);
    auto done = [&] { return looks >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(30));
  };
  const double joins = GetPserverMetrics().trainer_joins->Value();
  const double leaves = GetPserverMetrics().trainer_leaves->Value();
  std::thread job([&] {
    if (!looked(1)) return;
    int seen;
    {
      absl::MutexLock l(&mu);
      now.values[1] = "h pid 99";  // 11 died, 99 took id 1, within one look
      seen = looks;
    }
    if (!looked(seen + 2)) return;  // a whole read after the change
    for (int t : {0, 1}) a.Complete(t);
    a.Wake();
  });
  absl::Status s = a.AwaitAllCompleted(absl::Seconds(60), [] { return false; });
  job.join();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(GetPserverMetrics().trainer_joins->Value() - joins, 3);  // 0, 1, and 1 again
  EXPECT_EQ(GetPserverMetrics().trainer_leaves->Value() - leaves, 1);
}

TEST(TrainerActivityTest, AnElasticJobNoTrainerJoinsIsBounded) {
  TrainerActivity a(2);
  a.set_members([] { return TrainerMembers{.min = 1}; });
  absl::Status s = a.AwaitAllCompleted(absl::Milliseconds(300), [] { return false; });
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("only 0 trainer(s) joined"), std::string::npos) << s;
}

}  // namespace
}  // namespace oar
