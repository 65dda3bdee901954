// ReplayGuard: each (trainer, sequence number) is applied once; a duplicate
// gets the first answer, waiting for it when the first is still running.
#include "pserver/replay_guard.h"

#include <atomic>
#include <thread>

#include "common/rpc/rpc_client.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

constexpr uint64_t kInc = uint64_t{5} << rpc::kSeqCounterBits;  // an incarnation

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

TEST(ReplayGuardTest, ADuplicateGetsTheFirstAnswerAndIsNotAppliedAgain) {
  ReplayGuard g(2);
  auto t = g.Begin(0, kInc | 1, Soon());
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->duplicate);
  g.End(0, kInc | 1, absl::InvalidArgumentError("bad shape"));
  auto d = g.Begin(0, kInc | 1, Soon());
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->duplicate);
  EXPECT_EQ(d->first_answer.code(), absl::StatusCode::kInvalidArgument);
  // Another trainer's number 1 is its own call.
  EXPECT_FALSE(g.Begin(1, kInc | 1, Soon())->duplicate);
  EXPECT_EQ(g.duplicates(), 1);
}

// An UNAVAILABLE answer (a BATCH_BARRIER that overtook its gradients) asks
// for the retry: the retry runs afresh, and its answer is the one kept.
TEST(ReplayGuardTest, ARetryOfAnUnavailableAnswerRunsAfresh) {
  ReplayGuard g(1);
  ASSERT_FALSE(g.Begin(0, kInc | 7, Soon())->duplicate);
  g.End(0, kInc | 7, absl::UnavailableError("came before 1 of the 2 variable(s)"));
  auto retry = g.TryBegin(0, kInc | 7);
  ASSERT_TRUE(retry.has_value());
  EXPECT_FALSE(retry->duplicate);
  g.End(0, kInc | 7, absl::OkStatus());
  auto again = g.Begin(0, kInc | 7, Soon());  // a later copy: answered as the retry was
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  EXPECT_TRUE(again->first_answer.ok());
}

TEST(ReplayGuardTest, ADuplicateWaitsForTheFirstStillRunning) {
  ReplayGuard g(1);
  ASSERT_FALSE(g.Begin(0, kInc | 7, Soon())->duplicate);
  std::atomic<bool> answered{false};
  absl::StatusOr<ReplayGuard::Ticket> dup;
  std::thread retry([&] {
    dup = g.Begin(0, kInc | 7, Soon());
    answered = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(answered.load());
  g.End(0, kInc | 7, absl::OkStatus());
  retry.join();
  ASSERT_TRUE(dup.ok());
  EXPECT_TRUE(dup->duplicate);
  EXPECT_TRUE(dup->first_answer.ok());
  // Bounded: a duplicate of a call that never ends gives up at its deadline.
  ASSERT_FALSE(g.Begin(0, kInc | 8, Soon())->duplicate);
  EXPECT_EQ(g.Begin(0, kInc | 8, absl::Now() + absl::Milliseconds(50)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// What a transport's I/O thread uses: never waits.
TEST(ReplayGuardTest, TryBeginDeclinesWhileTheFirstRunsAndOtherwiseActsAsBegin) {
  ReplayGuard g(1);
  auto first = g.TryBegin(0, kInc | 3);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(first->duplicate);
  EXPECT_FALSE(g.TryBegin(0, kInc | 3).has_value());  // still running: left to a thread that may wait
  EXPECT_EQ(g.duplicates(), 0);
  g.End(0, kInc | 3, absl::NotFoundError("no such parameter"));
  auto dup = g.TryBegin(0, kInc | 3);
  ASSERT_TRUE(dup.has_value());
  EXPECT_TRUE(dup->duplicate);
  EXPECT_EQ(dup->first_answer.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(g.duplicates(), 1);
  EXPECT_FALSE(g.TryBegin(0, 0)->duplicate);  // Fluid's unnumbered calls
}

TEST(ReplayGuardTest, SequenceZeroIsNeverDeduplicated) {
  ReplayGuard g(1);
  EXPECT_FALSE(g.Begin(0, 0, Soon())->duplicate);
  g.End(0, 0, absl::OkStatus());
  EXPECT_FALSE(g.Begin(0, 0, Soon())->duplicate);
}

TEST(ReplayGuardTest, ANewIncarnationStartsAFreshTable) {
  ReplayGuard g(1);
  ASSERT_FALSE(g.Begin(0, kInc | 3, Soon())->duplicate);
  g.End(0, kInc | 3, absl::OkStatus());
  const uint64_t restarted = uint64_t{9} << rpc::kSeqCounterBits;
  EXPECT_FALSE(g.Begin(0, restarted | 3, Soon())->duplicate);  // a restarted trainer's own call 3
}

// Regression: a late call of the earlier run renewed the table, so the new
// run's retry of a call already applied ran again.
TEST(ReplayGuardTest, AnEarlierRunsLateCallLeavesTheNewRunsTableAlone) {
  ReplayGuard g(1);
  const uint64_t restarted = uint64_t{9} << rpc::kSeqCounterBits;
  ASSERT_FALSE(g.Begin(0, kInc | 1, Soon())->duplicate);
  g.End(0, kInc | 1, absl::OkStatus());
  ASSERT_FALSE(g.Begin(0, restarted | 1, Soon())->duplicate);  // the new run's call 1
  g.End(0, restarted | 1, absl::OkStatus());
  EXPECT_FALSE(g.Begin(0, kInc | 2, Soon())->duplicate);  // the earlier run's late call: not tracked
  g.End(0, kInc | 2, absl::InternalError("refused by the handler"));
  auto retry = g.Begin(0, restarted | 1, Soon());
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->duplicate) << "the new run's retry of an applied call must not run again";
  EXPECT_FALSE(g.TryBegin(0, kInc | 1)->duplicate);
}

TEST(ReplayGuardTest, NumbersOlderThanTheWindowCountAsFinishedDuplicates) {
  ReplayGuard g(1, /*window=*/4);
  for (uint64_t i = 1; i <= 10; ++i) {
    ASSERT_FALSE(g.Begin(0, kInc | i, Soon())->duplicate) << i;
    g.End(0, kInc | i, absl::OkStatus());
  }
  EXPECT_TRUE(g.Begin(0, kInc | 2, Soon())->duplicate);    // evicted: long finished
  EXPECT_TRUE(g.Begin(0, kInc | 9, Soon())->duplicate);    // still kept
  EXPECT_FALSE(g.Begin(0, kInc | 11, Soon())->duplicate);  // new
}

}  // namespace
}  // namespace oar
