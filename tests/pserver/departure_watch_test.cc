// DepartureWatch: a joined trainer whose entry leaves the job's member list
// is taken out of the steps with the pservers' agreed last step (what this
// pserver saw is what it records); one still listed, or just joined and not
// yet seen in the list, stays; a failed agreement ends the barrier with
// the reason. Its thread looks again when the member list says it changed.
// A trainer the step waited on, silent, for the timeout is taken out
// through the view (its lease revoked), once, and only the process that
// joined.
#include "pserver/departure_watch.h"

#include <thread>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

struct Job {
  absl::Mutex mu;
  TrainerMembers members;
  std::vector<LeaveRecord> records;
  std::vector<std::pair<int, std::string>> taken_out;
  absl::StatusOr<int64_t> verdict = int64_t{0};

  std::function<TrainerMembers()> List() {
    return [this] {
      absl::MutexLock l(&mu);
      TrainerMembers m = members;
      m.take_out = [this](int t, const std::string& value) {
        absl::MutexLock l(&mu);
        taken_out.emplace_back(t, value);
        return absl::OkStatus();
      };
      return m;
    };
  }
  AgreeOnLeave Agree() {
    return [this](const LeaveRecord& r) {
      absl::MutexLock l(&mu);
      records.push_back(r);
      return verdict;
    };
  }
  void Set(std::map<int, std::string> values) {
    absl::MutexLock l(&mu);
    members.values = values;
    members.live.clear();
    for (const auto& [t, v] : values) members.live.insert(t);
  }
};

// Trainers `ids` join at step 0 as processes "h pid 1<id>".
void JoinAt0(StepBarrier* b, std::initializer_list<int> ids) {
  for (int t : ids) {
    ASSERT_TRUE(b->Hold(t).ok());
    ASSERT_TRUE(b->Join(t, 0, absl::StrCat("h pid 1", t)).ok());
  }
}

TEST(DepartureWatchTest, ATrainerGoneFromTheListLeavesTheStepsAtTheAgreedStep) {
  StepBarrier b(3, absl::Seconds(5), StepBarrier::Elastic{});
  Job job;
  job.Set({{0, "h pid 10"}, {1, "h pid 11"}});
  DepartureWatch watch(&b, job.List(), job.Agree(), "pserver test");
  ASSERT_NO_FATAL_FAILURE(JoinAt0(&b, {0, 1}));
  watch.Look();
  EXPECT_EQ(b.joined().size(), 2u);
  EXPECT_TRUE(job.records.empty());
  // Trainer 1's lease ran out; a new process took its id (another value).
  job.Set({{0, "h pid 10"}, {1, "h pid 99"}});
  job.verdict = int64_t{-1};
  watch.Look();
  ASSERT_EQ(job.records.size(), 1u);
  EXPECT_EQ(job.records[0].trainer, 1);
  EXPECT_EQ(job.records[0].member, "h pid 11");
  EXPECT_EQ(job.records[0].step, 0);
  EXPECT_FALSE(job.records[0].contributed);
  EXPECT_EQ(b.joined().count(1), 0u);
  EXPECT_TRUE(absl::IsFailedPrecondition(b.FetchBarrier(1)));
}

TEST(DepartureWatchTest, AJoinerNotYetInTheListIsGivenTheWatchsLag) {
  StepBarrier b(2, absl::Seconds(5), StepBarrier::Elastic{});
  Job job;
  job.Set({});
  DepartureWatch watch(&b, job.List(), job.Agree(), "pserver test");
  ASSERT_NO_FATAL_FAILURE(JoinAt0(&b, {0}));
  watch.Look();
  EXPECT_TRUE(job.records.empty());  // joined a moment ago: the list may lag
  absl::SleepFor(absl::Milliseconds(1100));
  watch.Look();
  EXPECT_EQ(job.records.size(), 1u);  // never listed since: gone
}

// The thread waits on the view's await_change between looks (the etcd
// watch wakes it), at most 100 ms at a time; a change ends the wait.
TEST(DepartureWatchTest, ItsThreadLooksAgainWhenTheListSaysItChanged) {
  StepBarrier b(2, absl::Seconds(5), StepBarrier::Elastic{});
  Job job;
  job.Set({{0, "h pid 10"}, {1, "h pid 11"}});
  absl::Mutex mu;
  int waits = 0;
  bool changed = false, all_done = false;
  absl::Duration asked;
  auto list = [&] {
    TrainerMembers m = job.List()();
    m.await_change = [&](absl::Duration at_most) {
      absl::MutexLock l(&mu);
      ++waits;
      asked = at_most;
      auto go = [&] { return changed || all_done; };
      mu.AwaitWithTimeout(absl::Condition(&go), absl::Seconds(30));  // the test says when
      changed = false;
    };
    return m;
  };
  ASSERT_NO_FATAL_FAILURE(JoinAt0(&b, {0, 1}));
  DepartureWatch watch(&b, list, job.Agree(), "pserver test");
  watch.Start();
  auto waited = [&](int n) {
    absl::MutexLock l(&mu);
    auto done = [&] { return waits >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(30));
  };
  ASSERT_TRUE(waited(1));  // it looked once and waits on the list
  EXPECT_EQ(b.joined().size(), 2u);
  job.Set({{0, "h pid 10"}});
  job.verdict = int64_t{-1};
  {
    absl::MutexLock l(&mu);
    EXPECT_EQ(asked, absl::Milliseconds(100));
    changed = true;
  }
  ASSERT_TRUE(waited(2));  // it looked again, and waits again
  EXPECT_EQ(b.joined().count(1), 0u);
  {
    absl::MutexLock l(&mu);
    all_done = true;  // lets Stop end the thread's waits
  }
  watch.Stop();
  absl::MutexLock l(&job.mu);
  ASSERT_EQ(job.records.size(), 1u);
  EXPECT_EQ(job.records[0].trainer, 1);
}

TEST(DepartureWatchTest, AFailedAgreementEndsTheBarrierWithTheReason) {
  StepBarrier b(2, absl::Seconds(5), StepBarrier::Elastic{});
  Job job;
  job.Set({{0, "h pid 10"}, {1, "h pid 11"}});
  DepartureWatch watch(&b, job.List(), job.Agree(), "pserver test");
  ASSERT_NO_FATAL_FAILURE(JoinAt0(&b, {0, 1}));
  watch.Look();
  job.Set({{1, "h pid 11"}});
  job.verdict = absl::DeadlineExceededError("pserver(s) 1 recorded nothing");
  watch.Look();
  absl::Status s = b.BeforeGet(1);  // the survivor hears why the job stopped
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(s.message().find("agreeing with the other pservers on the steps of trainer 0"), std::string::npos) << s;
}

// One whole step of trainers `ids`, each sending a gradient: each has
// stepped since it joined.
void StepAll(StepBarrier* b, std::initializer_list<int> ids) {
  for (int t : ids) ASSERT_TRUE(b->FetchBarrier(t).ok());
  ASSERT_TRUE(*b->AwaitPhaseEnd());
  for (int t : ids) {
    ASSERT_TRUE(b->BeginReceive(t).ok());
    b->EndReceive(t, true);
    ASSERT_TRUE(b->BatchBarrier(t, 1).ok());
  }
  ASSERT_TRUE(*b->AwaitPhaseEnd());
  b->OptimizeDone();
}

TEST(DepartureWatchTest, ATrainerTheStepWaitedOnSilentlyForTheTimeoutIsTakenOutOnce) {
  StepBarrier b(3, absl::Seconds(1), StepBarrier::Elastic{});
  Job job;
  job.Set({{0, "h pid 10"}, {1, "h pid 11"}, {2, "h pid 12"}});
  DepartureWatch watch(&b, job.List(), job.Agree(), "pserver test");
  ASSERT_NO_FATAL_FAILURE(JoinAt0(&b, {0, 1, 2}));
  ASSERT_NO_FATAL_FAILURE(StepAll(&b, {0, 1, 2}));
  ASSERT_TRUE(b.FetchBarrier(0).ok());
  ASSERT_TRUE(b.FetchBarrier(2).ok());
  watch.Look();
  EXPECT_TRUE(job.taken_out.empty());  // not silent for the timeout yet
  absl::SleepFor(absl::Milliseconds(1050));
  watch.Look();
  watch.Look();  // asked once
  ASSERT_EQ(job.taken_out.size(), 1u);
  EXPECT_EQ(job.taken_out[0], std::make_pair(1, std::string("h pid 11")));
  EXPECT_TRUE(job.records.empty());  // still listed: it leaves when its entry goes
  job.Set({{0, "h pid 10"}, {2, "h pid 12"}});
  watch.Look();
  ASSERT_EQ(job.records.size(), 1u);
  EXPECT_EQ(job.records[0].trainer, 1);
}

TEST(DepartureWatchTest, ASilentTrainerWhoseIdAnotherProcessHoldsNowIsNotTakenOut) {
  StepBarrier b(2, absl::Milliseconds(300), StepBarrier::Elastic{});
  Job job;
  job.Set({{0, "h pid 10"}, {1, "h pid 11"}});
  DepartureWatch watch(&b, job.List(), job.Agree(), "pserver test");
  ASSERT_NO_FATAL_FAILURE(JoinAt0(&b, {0, 1}));
  ASSERT_NO_FATAL_FAILURE(StepAll(&b, {0, 1}));
  watch.Look();
  ASSERT_TRUE(b.FetchBarrier(0).ok());
  absl::SleepFor(absl::Milliseconds(350));
  job.Set({{0, "h pid 10"}, {1, "h pid 99"}});  // a successor registered on id 1
  job.verdict = int64_t{-1};
  watch.Look();
  EXPECT_TRUE(job.taken_out.empty());  // the old one leaves as gone; the new one is not touched
  EXPECT_EQ(job.records.size(), 1u);
}

}  // namespace
}  // namespace oar
