// The sync step state machine of an elastic job (step_barrier_elastic.cc):
// a trainer counts from the step its JOIN names and not before; a hold
// keeps a serve phase open until the joiner's JOIN; a barrier without
// gradients arrives without contributing; a departed trainer is refused
// and counted in exactly the steps the pservers agreed on; the job waits
// for MIN trainers and for members yet to join, and ends once every
// trainer that joined has completed or left.
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "pserver/step_barrier.h"

namespace oar {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(5);

// Phase ends are awaited on a thread of their own (the loop's).
class Loop {
 public:
  explicit Loop(StepBarrier* b) : b_(b) {
    thread_ = std::thread([this] {
      result_ = b_->AwaitPhaseEnd();
      done_.Notify();
    });
  }
  ~Loop() { Join(); }
  bool Ended(absl::Duration within) { return done_.WaitForNotificationWithTimeout(within); }
  absl::StatusOr<bool> Join() {
    if (thread_.joinable()) thread_.join();
    return result_;
  }

 private:
  StepBarrier* b_;
  absl::StatusOr<bool> result_ = false;
  absl::Notification done_;
  std::thread thread_;
};

// Trainer `t` sends one gradient, then BATCH_BARRIER.
void Contribute(StepBarrier* b, int t) {
  ASSERT_TRUE(b->BeginReceive(t).ok());
  b->EndReceive(t, true);
  ASSERT_TRUE(b->BatchBarrier(t, /*sent=*/1).ok());
}

// Joins `t` at the step its hold answers.
int HoldAndJoin(StepBarrier* b, int t) {
  absl::StatusOr<int> held = b->Hold(t);
  EXPECT_TRUE(held.ok()) << held.status();
  EXPECT_TRUE(b->Join(t, *held, absl::StrCat("host pid ", t)).ok());
  return *held;
}

// Runs one whole step with `contributors` sending gradients and `idle`
// sending empty barriers; returns that step's contributors.
std::set<int> Step(StepBarrier* b, const std::set<int>& contributors, const std::set<int>& idle = {}) {
  for (int t : contributors) EXPECT_TRUE(b->FetchBarrier(t).ok());
  for (int t : idle) EXPECT_TRUE(b->FetchBarrier(t).ok());
  EXPECT_TRUE(*Loop(b).Join());  // kServe -> kRecv
  for (int t : contributors) Contribute(b, t);
  for (int t : idle) EXPECT_TRUE(b->BatchBarrier(t, /*sent=*/0).ok());
  EXPECT_TRUE(*Loop(b).Join());  // kRecv -> kOptimize
  std::set<int> applied = b->contributors_at_optimize();
  b->OptimizeDone();
  return applied;
}

TEST(StepBarrierElasticTest, ATrainerCountsFromTheStepItJoinedAtAndNotBefore) {
  StepBarrier b(3, kTimeout, StepBarrier::Elastic{});
  EXPECT_EQ(HoldAndJoin(&b, 0), 0);
  // Nothing from a trainer that has not joined.
  EXPECT_TRUE(absl::IsFailedPrecondition(b.BeginReceive(1)));
  EXPECT_TRUE(absl::IsFailedPrecondition(b.FetchBarrier(1)));
  EXPECT_EQ(Step(&b, {0}), std::set<int>({0}));
  EXPECT_EQ(Step(&b, {0}), std::set<int>({0}));
  // Trainer 1 holds while step 2 serves: the serve phase does not end
  // (trainer 0 has fetched) until it joins, and then waits for its fetch.
  absl::StatusOr<int> held = b.Hold(1);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(*held, 2);
  ASSERT_TRUE(b.FetchBarrier(0).ok());
  Loop serving(&b);
  EXPECT_FALSE(serving.Ended(absl::Milliseconds(300)));
  ASSERT_TRUE(b.Join(1, 2, "host pid 1").ok());
  EXPECT_FALSE(serving.Ended(absl::Milliseconds(300)));  // now it waits for trainer 1's fetch
  ASSERT_TRUE(b.BeforeGet(1).ok());
  ASSERT_TRUE(b.FetchBarrier(1).ok());
  EXPECT_TRUE(*serving.Join());
  Contribute(&b, 0);
  Contribute(&b, 1);
  EXPECT_TRUE(*Loop(&b).Join());
  EXPECT_EQ(b.contributors_at_optimize(), std::set<int>({0, 1}));
  b.OptimizeDone();
}

TEST(StepBarrierElasticTest, AJoinForAStepAlreadyCollectedIsRefusedAndHoldsNextStep) {
  StepBarrier b(2, kTimeout, StepBarrier::Elastic{});
  HoldAndJoin(&b, 0);
  ASSERT_TRUE(b.FetchBarrier(0).ok());
  ASSERT_TRUE(*Loop(&b).Join());  // step 0 receives now
  absl::StatusOr<int> held = b.Hold(1);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(*held, 1);  // the next serve phase
  absl::Status late = b.Join(1, 0, "host pid 1");
  EXPECT_TRUE(absl::IsFailedPrecondition(late)) << late;
  EXPECT_NE(late.message().find("hold again"), std::string::npos) << late;
  EXPECT_TRUE(b.Join(1, 1, "host pid 1").ok());
  // Another process under the same id is refused while this one is in.
  EXPECT_TRUE(absl::IsUnavailable(b.Join(1, 1, "host pid 99")));
}

TEST(StepBarrierElasticTest, ABarrierWithoutGradientsArrivesWithoutContributing) {
  StepBarrier b(3, kTimeout, StepBarrier::Elastic{});
  HoldAndJoin(&b, 0);
  HoldAndJoin(&b, 1);
  EXPECT_EQ(Step(&b, {0}, {1}), std::set<int>({0}));
  EXPECT_EQ(Step(&b, {}, {0, 1}), std::set<int>());  // nothing to apply: the loop skips the pass
  EXPECT_EQ(b.step(), 2);
  EXPECT_EQ(Step(&b, {0, 1}), std::set<int>({0, 1}));
}

TEST(StepBarrierElasticTest, ADepartedTrainerCountsInTheAgreedStepsOnlyAndIsRefusedAfter) {
  StepBarrier b(3, kTimeout, StepBarrier::Elastic{});
  HoldAndJoin(&b, 0);
  HoldAndJoin(&b, 1);
  HoldAndJoin(&b, 2);
  EXPECT_EQ(Step(&b, {0, 1, 2}), std::set<int>({0, 1, 2}));
  // Step 1: trainer 1's gradients arrived here, its barrier did not (it
  // reached another pserver), then its lease ran out.
  for (int t : {0, 1, 2}) ASSERT_TRUE(b.FetchBarrier(t).ok());
  ASSERT_TRUE(*Loop(&b).Join());
  ASSERT_TRUE(b.BeginReceive(1).ok());
  b.EndReceive(1, true);
  Contribute(&b, 0);
  std::optional<StepBarrier::Departure> d = b.Depart(1);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->step, 1);
  EXPECT_FALSE(d->contributed);
  EXPECT_TRUE(d->contributed_before);
  absl::Status refused = b.BatchBarrier(1, 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused));
  EXPECT_NE(refused.message().find("has left the job"), std::string::npos) << refused;
  Loop receiving(&b);
  Contribute(&b, 2);
  EXPECT_FALSE(receiving.Ended(absl::Milliseconds(300)));  // until the pservers agree
  b.Resolve(1, /*last_step=*/1);                           // another pserver had its barrier
  EXPECT_TRUE(*receiving.Join());
  EXPECT_EQ(b.contributors_at_optimize(), std::set<int>({0, 1, 2}));
  b.OptimizeDone();
  EXPECT_EQ(Step(&b, {0, 2}), std::set<int>({0, 2}));  // gone from the steps after
  EXPECT_TRUE(absl::IsFailedPrecondition(b.FetchBarrier(1)));
  EXPECT_TRUE(b.joined().count(0) && !b.joined().count(1));
  // Agreed otherwise (no pserver had its barrier): not in the step.
  HoldAndJoin(&b, 1);
  for (int t : {0, 1, 2}) ASSERT_TRUE(b.FetchBarrier(t).ok());
  ASSERT_TRUE(*Loop(&b).Join());
  Contribute(&b, 0);
  Contribute(&b, 2);
  ASSERT_TRUE(b.Depart(1).has_value());
  b.Resolve(1, /*last_step=*/2);  // the step before
  ASSERT_TRUE(*Loop(&b).Join());
  EXPECT_EQ(b.contributors_at_optimize(), std::set<int>({0, 2}));
}

TEST(StepBarrierElasticTest, TheJobEndsOnceEveryTrainerThatJoinedCompletedOrLeftAndNoMemberIsYetToJoin) {
  StepBarrier b(3, kTimeout, StepBarrier::Elastic{});
  b.SetMembers({0, 1});
  HoldAndJoin(&b, 0);
  EXPECT_EQ(Step(&b, {0}), std::set<int>({0}));
  ASSERT_TRUE(b.Complete(0).ok());
  Loop waiting(&b);
  EXPECT_FALSE(waiting.Ended(absl::Milliseconds(300)));  // trainer 1 is a member, not joined yet
  b.SetMembers({0});                                     // it went without joining
  absl::StatusOr<bool> more = waiting.Join();
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_FALSE(*more);
}

TEST(StepBarrierElasticTest, FewerThanMinTrainersForTheTimeoutStopsTheJobWithTheReason) {
  StepBarrier b(3, absl::Milliseconds(300), StepBarrier::Elastic{.min_trainers = 2});
  HoldAndJoin(&b, 0);
  ASSERT_TRUE(b.FetchBarrier(0).ok());
  absl::StatusOr<bool> more = Loop(&b).Join();
  ASSERT_FALSE(more.ok());
  EXPECT_TRUE(absl::IsUnavailable(more.status()));
  EXPECT_NE(more.status().message().find("only 1 trainer(s) joined in 300ms, fewer than the 2 it needs (--trainers "
                                         "2:3); start more trainers, or lower MIN"),
            std::string::npos)
      << more.status();
}

// Silent names a trainer the phase waits on once another trainer arrived
// and it then said nothing for the timeout (its last message, or that
// arrival, whichever came later): a lost machine's trainer, or a stuck one.
// `now` is the caller's, so the test asks about the future, not sleeps.
TEST(StepBarrierElasticTest, SilentNamesTheTrainersAPhaseWaitsOnForATimeoutAfterAnotherArrived) {
  constexpr absl::Duration kLease = absl::Seconds(4);
  StepBarrier b(3, kLease, StepBarrier::Elastic{});
  for (int t : {0, 1, 2}) HoldAndJoin(&b, t);
  // Trainers 0 and 2 step; 1, just joined, has not: still starting (its
  // setup after its pull may be long), it is not named.
  ASSERT_TRUE(b.FetchBarrier(0).ok());
  ASSERT_TRUE(b.FetchBarrier(2).ok());
  EXPECT_TRUE(b.Silent(absl::Now() + 10 * kLease).empty());
  ASSERT_TRUE(b.FetchBarrier(1).ok());
  ASSERT_TRUE(*Loop(&b).Join());
  Contribute(&b, 0);
  Contribute(&b, 2);
  EXPECT_TRUE(b.Silent(absl::Now() + 10 * kLease).empty());
  Contribute(&b, 1);
  ASSERT_TRUE(*Loop(&b).Join());
  b.OptimizeDone();
  // Step 1: every trainer has stepped.
  EXPECT_TRUE(b.Silent(absl::Now() + 10 * kLease).empty());  // nobody arrived: all may be slow alike
  ASSERT_TRUE(b.FetchBarrier(0).ok());
  const absl::Time arrived = absl::Now();
  EXPECT_TRUE(b.Silent(arrived + kLease / 2).empty());
  std::map<int, absl::Duration> silent = b.Silent(arrived + kLease + absl::Seconds(1));
  ASSERT_EQ(silent.size(), 2u);
  EXPECT_GE(silent[1], kLease);
  EXPECT_GE(silent[2], kLease);
  // A word from trainer 2 (its Get) restarts its clock; 1 stays silent.
  absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(b.BeforeGet(2).ok());
  silent = b.Silent(arrived + kLease + absl::Milliseconds(1));
  EXPECT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent.count(1), 1u);
  // The collecting phase: trainers 1 and 2 arrive at the serve phase's end,
  // then 0 and 2 contribute; 1, which said nothing since, is silent.
  ASSERT_TRUE(b.FetchBarrier(1).ok());
  ASSERT_TRUE(b.FetchBarrier(2).ok());
  ASSERT_TRUE(*Loop(&b).Join());
  EXPECT_TRUE(b.Silent(absl::Now() + 10 * kLease).empty());  // none arrived at this phase yet
  Contribute(&b, 0);
  Contribute(&b, 2);
  const absl::Time batch = absl::Now();
  EXPECT_TRUE(b.Silent(batch + kLease / 2).empty());
  silent = b.Silent(batch + kLease);
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent.count(1), 1u);
  // Taken out (its lease revoked): no longer waited on, so not silent.
  ASSERT_TRUE(b.Depart(1).has_value());
  EXPECT_TRUE(b.Silent(batch + 10 * kLease).empty());
}

}  // namespace
}  // namespace oar
