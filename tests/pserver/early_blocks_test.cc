// EarlyBlocks alone: a block starts at most once a step and only when its
// caller's test says so; Join waits for what started and reports its first
// error; a checkpoint's Hold waits for a step boundary, keeps new starts
// out until Resume, and gives up at its timeout.
#include "pserver/early_blocks.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

TEST(EarlyBlocksTest, ABlockStartsOnceAStepAndOnlyWhenEligible) {
  ThreadPool pool(2);
  EarlyBlocks early(&pool);
  std::atomic<int> runs{0};
  auto run = [&] {
    ++runs;
    return absl::OkStatus();
  };
  EXPECT_FALSE(early.TryStart(
      1, [] { return false; }, run));
  EXPECT_TRUE(early.TryStart(
      1, [] { return true; }, run));
  EXPECT_FALSE(early.TryStart(
      1, [] { return true; }, run));  // started already this step
  EXPECT_TRUE(early.TryStart(
      2, [] { return true; }, run));
  auto started = early.Join();
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(*started, (std::set<int>{1, 2}));
  EXPECT_EQ(runs.load(), 2);
  early.EndStep();
  EXPECT_TRUE(early.TryStart(
      1, [] { return true; }, run));  // the next step
  ASSERT_TRUE(early.Join().ok());
  EXPECT_EQ(runs.load(), 3);
}

TEST(EarlyBlocksTest, JoinWaitsForTheRunsAndReportsTheFirstError) {
  ThreadPool pool(2);
  EarlyBlocks early(&pool);
  absl::Notification go;
  std::atomic<bool> finished{false};
  ASSERT_TRUE(early.TryStart(
      3, [] { return true; },
      [&] {
        go.WaitForNotification();
        finished = true;
        return absl::InternalError("block 3 failed");
      }));
  std::thread release([&] { go.Notify(); });
  auto joined = early.Join();
  release.join();
  EXPECT_TRUE(finished.load()) << "Join returned before the run ended";
  ASSERT_FALSE(joined.ok());
  EXPECT_EQ(joined.status().message(), "block 3 failed");
}

TEST(EarlyBlocksTest, AHoldWaitsForTheStepBoundaryAndKeepsStartsOutUntilResumed) {
  ThreadPool pool(2);
  EarlyBlocks early(&pool);
  auto ok = [] { return absl::OkStatus(); };
  ASSERT_TRUE(early.TryStart(
      1, [] { return true; }, ok));
  // A block started and the step not ended: no boundary within the timeout.
  absl::Status s = early.Hold(absl::Milliseconds(50));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_TRUE(early.TryStart(
      2, [] { return true; }, ok));  // that Hold let go
  std::atomic<bool> held{false};
  std::thread checkpoint([&] {
    EXPECT_TRUE(early.Hold(absl::Seconds(60)).ok());
    held = true;
  });
  ASSERT_TRUE(early.Join().ok());
  early.EndStep();  // the boundary
  checkpoint.join();
  EXPECT_TRUE(held.load());
  EXPECT_FALSE(early.TryStart(
      1, [] { return true; }, ok))
      << "a held step started a block";
  early.Resume();
  EXPECT_TRUE(early.TryStart(
      1, [] { return true; }, ok));
  EXPECT_TRUE(early.Join().ok());
}

}  // namespace
}  // namespace oar
