// The sync step state machine with 1-4 trainers as threads: every Get sees
// the optimize of its own step, early completion lowers the fan-in, a
// trainer that never arrives fails the barrier naming it.
#include "pserver/step_barrier.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

// Runs the pserver loop; counts optimizes.
absl::Status Loop(StepBarrier* b, std::atomic<int>* optimizes) {
  while (true) {
    absl::StatusOr<bool> more = b->AwaitPhaseEnd();
    if (!more.ok()) {
      b->End(more.status());  // as ParameterServer: waiting trainers learn why, instead of hanging
      return more.status();
    }
    if (!*more) return absl::OkStatus();
    if (b->phase() == StepBarrier::Phase::kOptimize) {
      ++*optimizes;
      b->OptimizeDone();
    }
  }
}

// One trainer: the initial pull, then `steps` steps, then COMPLETE. Each
// Get must see exactly the optimizes of the steps pushed so far.
void Trainer(StepBarrier* b, int id, int steps, std::atomic<int>* errors) {
  auto expect = [&](const absl::Status& s) {
    if (!s.ok()) ++*errors;
  };
  expect(b->BeforeGet(id));
  expect(b->FetchBarrier(id));
  for (int i = 0; i < steps; ++i) {
    absl::Status r = b->BeginReceive(id);
    expect(r);
    if (r.ok()) b->EndReceive(id, true);
    expect(b->BatchBarrier(id));
    expect(b->BeforeGet(id));
    if (b->step() != i + 1) ++*errors;  // the parameters of this step's update
    expect(b->FetchBarrier(id));
  }
  expect(b->Complete(id));
}

// The same trainer, its Gets parked (WhenGetReady, as a transport's I/O
// thread asks): each is served exactly once, with its own step's parameters
// — on the loop's thread when it had to wait, at once when it did not.
void ParkingTrainer(StepBarrier* b, int id, int steps, std::thread::id loop, std::atomic<int>* errors,
                    std::atomic<int>* parked) {
  auto get = [&](int want_step) {
    absl::Notification served;
    const std::thread::id me = std::this_thread::get_id();
    b->WhenGetReady(id, [&](absl::Status s) {
      if (!s.ok() || b->step() != want_step) ++*errors;
      if (std::this_thread::get_id() != me) {
        if (std::this_thread::get_id() != loop) ++*errors;
        ++*parked;
      }
      served.Notify();
    });
    served.WaitForNotification();
  };
  get(0);
  if (!b->FetchBarrier(id).ok()) ++*errors;
  for (int i = 0; i < steps; ++i) {
    if (b->BeginReceive(id).ok()) {
      b->EndReceive(id, true);
    } else {
      ++*errors;
    }
    if (!b->BatchBarrier(id).ok()) ++*errors;
    get(i + 1);
    if (!b->FetchBarrier(id).ok()) ++*errors;
  }
  if (!b->Complete(id).ok()) ++*errors;
}

class StepBarrierTest : public ::testing::TestWithParam<int> {};

TEST_P(StepBarrierTest, ParkedGetsAreServedOnceWithTheirOwnStep) {
  const int n = GetParam();
  StepBarrier b(n, absl::Seconds(30));
  std::atomic<int> optimizes{0}, errors{0}, parked{0};
  absl::Status loop;
  std::thread server([&] { loop = Loop(&b, &optimizes); });
  std::vector<std::thread> trainers;
  for (int t = 0; t < n; ++t) trainers.emplace_back(ParkingTrainer, &b, t, 6, server.get_id(), &errors, &parked);
  for (auto& t : trainers) t.join();
  server.join();
  EXPECT_TRUE(loop.ok()) << loop;
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(optimizes.load(), 6);
  EXPECT_LE(parked.load(), 6 * n);  // the initial pull never waits
  // With 2 or more trainers the first to announce a step cannot be served
  // before the others have: its Get parks (every step, bar a freak schedule).
  if (n >= 2) EXPECT_GT(parked.load(), 0);
}

TEST_P(StepBarrierTest, EveryStepOptimizesOnceAndGetsSeeTheirOwnStep) {
  const int n = GetParam();
  StepBarrier b(n, absl::Seconds(30));
  std::atomic<int> optimizes{0}, errors{0};
  absl::Status loop;
  std::thread server([&] { loop = Loop(&b, &optimizes); });
  std::vector<std::thread> trainers;
  for (int t = 0; t < n; ++t) trainers.emplace_back(Trainer, &b, t, 6, &errors);
  for (auto& t : trainers) t.join();
  server.join();
  EXPECT_TRUE(loop.ok()) << loop;
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(optimizes.load(), 6);
}

INSTANTIATE_TEST_SUITE_P(Trainers, StepBarrierTest, ::testing::Values(1, 2, 3, 4));

TEST(StepBarrierTest, ATrainerThatCompletesEarlyLetsTheOthersFinish) {
  StepBarrier b(3, absl::Seconds(30));
  std::atomic<int> optimizes{0}, errors{0};
  absl::Status loop;
  std::thread server([&] { loop = Loop(&b, &optimizes); });
  std::thread t0(Trainer, &b, 0, 6, &errors), t1(Trainer, &b, 1, 2, &errors), t2(Trainer, &b, 2, 6, &errors);
  t0.join();
  t1.join();
  t2.join();
  server.join();
  EXPECT_TRUE(loop.ok()) << loop;
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(optimizes.load(), 6);
}

TEST(StepBarrierTest, ATrainerThatNeverArrivesFailsTheBarrierNamingIt) {
  StepBarrier b(3, absl::Milliseconds(200));
  std::atomic<int> optimizes{0}, errors{0};
  absl::Status loop;
  std::thread server([&] { loop = Loop(&b, &optimizes); });
  // Trainers 0 and 2 pull and push once; trainer 1 never shows up.
  std::thread t0([&] {
    (void)b.BeforeGet(0);
    (void)b.FetchBarrier(0);
  });
  std::thread t2([&] {
    (void)b.BeforeGet(2);
    (void)b.FetchBarrier(2);
  });
  t0.join();
  t2.join();
  server.join();
  EXPECT_EQ(loop.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(loop.message().find("FETCH_BARRIER of step 0"), std::string::npos) << loop;
  EXPECT_NE(loop.message().find("trainer(s) 1 never arrived"), std::string::npos) << loop;
}

TEST(StepBarrierTest, OutOfRangeTrainerIdsAreRejectedAndStopReleasesWaits) {
  StepBarrier b(2, absl::Seconds(30));
  EXPECT_EQ(b.BatchBarrier(2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.BeginReceive(-1).message().find("trainer_id -1 is not in [0, 2)"), std::string::npos);
  // A Get for trainer 0 after its batch barrier waits for an optimize that
  // never comes; Stop releases it.
  ASSERT_TRUE(b.BatchBarrier(0).ok());
  absl::Status got;
  std::thread waiter([&] { got = b.BeforeGet(0); });
  b.Stop();
  waiter.join();
  EXPECT_EQ(got.code(), absl::StatusCode::kCancelled);
}

TEST(StepBarrierTest, EndAnswersParkedGetsAndLaterWaitsWithItsReason) {
  StepBarrier b(2, absl::Seconds(30));
  ASSERT_TRUE(b.BatchBarrier(0).ok());
  absl::Status parked = absl::UnknownError("not served");
  b.WhenGetReady(0, [&](absl::Status s) { parked = s; });
  EXPECT_EQ(parked.code(), absl::StatusCode::kUnknown);  // waits for an optimize pass
  absl::Status blocked;
  absl::Time returned;
  std::thread waiter([&] {
    blocked = b.BeforeGet(0);
    returned = absl::Now();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let it block (if not, it returns at once below)
  const absl::Status why = absl::DeadlineExceededError("BATCH_BARRIER of step 0 timed out: trainer(s) 1 never arrived");
  const absl::Time ended = absl::Now();
  b.End(why);
  waiter.join();
  EXPECT_LT(returned - ended, absl::Seconds(20)) << "End did not wake the blocked Get (it waited out its 60 s)";
  EXPECT_EQ(parked, why);
  EXPECT_EQ(blocked, why);
  b.Stop();  // the first reason stays
  absl::Status later;
  b.WhenGetReady(1, [&](absl::Status s) { later = s; });
  EXPECT_EQ(later, why);
  EXPECT_EQ(b.FetchBarrier(1), why);
}

// Regression: a gradient's handler checked "not optimizing", released the
// lock, then stored; a late copy could land while the optimize pass read the
// variable. Now a store in progress holds the next optimize pass back.
TEST(StepBarrierTest, AStoreInProgressHoldsTheOptimizePassBack) {
  StepBarrier b(1, absl::Seconds(20));
  ASSERT_TRUE(b.FetchBarrier(0).ok());
  ASSERT_TRUE(*b.AwaitPhaseEnd());  // kServe -> kRecv
  ASSERT_TRUE(b.BeginReceive(0).ok());
  ASSERT_TRUE(b.BatchBarrier(0).ok());
  std::atomic<bool> moved{false};
  std::thread loop([&] {
    EXPECT_TRUE(*b.AwaitPhaseEnd());
    moved = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(moved.load());  // still storing: no optimize yet
  EXPECT_EQ(b.phase(), StepBarrier::Phase::kRecv);
  b.EndReceive(0, true);
  loop.join();
  EXPECT_EQ(b.phase(), StepBarrier::Phase::kOptimize);
}

}  // namespace
}  // namespace oar

namespace oar {
namespace {

// After a restored pserver's resync: trainer 1 was admitted as fetched for
// the open serve phase and replayed its step (gradients and BATCH_BARRIER);
// its retried FETCH_BARRIER must end the replayed step, i.e. wait for the
// optimize that consumes that BATCH_BARRIER — not count in the open phase,
// which would let it send its next step's gradients into the replayed one.
TEST(StepBarrierRestoredTest, AFetchBarrierWaitsForTheOptimizeOfItsPendingBatchBarrier) {
  StepBarrier b(2, absl::Seconds(30), /*first_step=*/5);
  b.AdmitFetched(1);
  ASSERT_TRUE(b.BatchBarrier(1).ok());  // the replayed step's barrier, taken while serving
  std::atomic<bool> optimized{false}, fetched{false};
  std::thread trainer1([&] {
    EXPECT_TRUE(b.FetchBarrier(1).ok());
    fetched = true;
    EXPECT_TRUE(optimized.load()) << "FETCH_BARRIER returned before its step was applied";
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // room to return early, were it wrong
  EXPECT_FALSE(fetched.load()) << "FETCH_BARRIER counted in the serve phase its replayed step came in";
  b.AdmitFetched(0);
  ASSERT_TRUE(*b.AwaitPhaseEnd());  // serve -> recv
  EXPECT_FALSE(fetched.load());
  ASSERT_TRUE(b.BatchBarrier(0).ok());
  ASSERT_TRUE(*b.AwaitPhaseEnd());  // recv -> optimize
  EXPECT_FALSE(fetched.load());
  optimized = true;
  b.OptimizeDone();
  trainer1.join();
  EXPECT_TRUE(fetched.load());
}

// A trainer that writes its BATCH_BARRIER behind its gradients, unanswered,
// says how many it sent: the barrier counts only once they were all stored
// (a refused or overtaken gradient never leaves the step applied without
// it), and the count starts again from there.
TEST(StepBarrierTest, ABatchBarrierCountsOnlyOnceItsGradientsWereStored) {
  StepBarrier b(2, absl::Seconds(20));
  for (int t = 0; t < 2; ++t) ASSERT_TRUE(b.FetchBarrier(t).ok());
  ASSERT_TRUE(*b.AwaitPhaseEnd());  // kServe -> kRecv
  ASSERT_TRUE(b.BeginReceive(0).ok());
  b.EndReceive(0, true);
  ASSERT_TRUE(b.BeginReceive(0).ok());
  b.EndReceive(0, false);  // refused: does not count
  absl::Status early = b.BatchBarrier(0, /*sent=*/2);
  EXPECT_TRUE(absl::IsUnavailable(early)) << early;
  EXPECT_NE(early.message().find("trainer 0 came before 1 of the 2"), std::string::npos) << early;
  ASSERT_TRUE(b.BeginReceive(0).ok());
  b.EndReceive(0, true);  // its retry
  EXPECT_TRUE(b.BatchBarrier(0, 2).ok());
  // Trainer 1's count is its own; a barrier without a count (a Fluid
  // client, a replay) is not checked.
  EXPECT_TRUE(absl::IsUnavailable(b.BatchBarrier(1, 1)));
  EXPECT_TRUE(b.BatchBarrier(1, 0).ok());
  ASSERT_TRUE(*b.AwaitPhaseEnd());  // both counted: kRecv -> kOptimize
  EXPECT_EQ(b.phase(), StepBarrier::Phase::kOptimize);
  b.OptimizeDone();
  // Trainer 0's count restarted at its barrier: the next step needs its own.
  for (int t = 0; t < 2; ++t) ASSERT_TRUE(b.FetchBarrier(t).ok());
  ASSERT_TRUE(*b.AwaitPhaseEnd());
  EXPECT_TRUE(absl::IsUnavailable(b.BatchBarrier(0, 1)));
  ASSERT_TRUE(b.BeginReceive(0).ok());
  b.EndReceive(0, true);
  EXPECT_TRUE(b.BatchBarrier(0, 1).ok());
}

// A trainer that died after some sends and came back (a new incarnation in
// its sequence numbers) counts afresh: what its old run stored must not let
// the new run's barrier overtake the new run's own gradients.
TEST(StepBarrierTest, ARestartedTrainersCountStartsAfresh) {
  constexpr uint64_t kOld = uint64_t{7} << 40, kNew = uint64_t{9} << 40;
  StepBarrier b(1, absl::Seconds(20));
  ASSERT_TRUE(b.FetchBarrier(0).ok());
  ASSERT_TRUE(*b.AwaitPhaseEnd());  // kServe -> kRecv
  for (int i = 0; i < 2; ++i) {     // the old run's two gradients; then it died
    ASSERT_TRUE(b.BeginReceive(0).ok());
    b.EndReceive(0, true, kOld);
  }
  EXPECT_TRUE(absl::IsUnavailable(b.BatchBarrier(0, 1, kNew))) << "the new run's gradient is not stored yet";
  ASSERT_TRUE(b.BeginReceive(0).ok());
  b.EndReceive(0, true, kOld);  // the old run's late one: not the new run's
  EXPECT_TRUE(absl::IsUnavailable(b.BatchBarrier(0, 1, kNew)));
  absl::Status stale = b.BatchBarrier(0, 0, kOld);
  EXPECT_TRUE(absl::IsFailedPrecondition(stale)) << stale;
  EXPECT_NE(stale.message().find("earlier run of trainer 0"), std::string::npos) << stale;
  ASSERT_TRUE(b.BeginReceive(0).ok());
  b.EndReceive(0, true, kNew);
  EXPECT_TRUE(b.BatchBarrier(0, 1, kNew).ok());
}

TEST(StepBarrierTest, AReplacedRunsFetchBarrierAndCompleteAreRefused) {
  constexpr uint64_t kOld = uint64_t{7} << 40, kNew = uint64_t{9} << 40;
  StepBarrier b(2, absl::Seconds(20));
  ASSERT_TRUE(b.FetchBarrier(0, kOld).ok());
  ASSERT_TRUE(b.FetchBarrier(1).ok());
  ASSERT_TRUE(*b.AwaitPhaseEnd());               // kServe -> kRecv
  ASSERT_TRUE(b.BatchBarrier(0, 0, kNew).ok());  // trainer 0 restarted: its new run is the one counted
  // The old run's late COMPLETE would stop trainer 0 counting while its new
  // run trains; its late FETCH_BARRIER would end a serve phase for it.
  absl::Status complete = b.Complete(0, kOld);
  EXPECT_TRUE(absl::IsFailedPrecondition(complete)) << complete;
  EXPECT_NE(complete.message().find("earlier run of trainer 0"), std::string::npos) << complete;
  EXPECT_EQ(b.completed().count(0), 0u);
  absl::Status fetch = b.FetchBarrier(0, kOld);
  EXPECT_TRUE(absl::IsFailedPrecondition(fetch)) << fetch;
  // The new run's own go through.
  ASSERT_TRUE(b.BatchBarrier(1).ok());
  ASSERT_TRUE(*b.AwaitPhaseEnd());  // kRecv -> kOptimize
  b.OptimizeDone();
  EXPECT_TRUE(b.FetchBarrier(0, kNew).ok());
  EXPECT_TRUE(b.Complete(0, kNew).ok());
  EXPECT_EQ(b.completed().count(0), 1u);
}

}  // namespace
}  // namespace oar
