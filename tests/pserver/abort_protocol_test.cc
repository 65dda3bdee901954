// AbortProtocol alone: which ABORT stops the job and what every later call
// is answered, who counts as told and as echoed, and that Linger ends when
// every live trainer has been told and has echoed — or at its bounds, or on
// Stop — never waiting for a trainer that completed or for the one that
// failed.
#include "pserver/abort_protocol.h"

#include <thread>

#include "common/rpc/status_payloads.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

TEST(AbortProtocolTest, TheFirstAbortStopsTheJobNamingTheTrainerThatFailed) {
  AbortProtocol p(3);
  EXPECT_FALSE(p.aborting());
  EXPECT_TRUE(p.Refusal().ok());
  absl::Status why;
  ASSERT_TRUE(p.Abort(2, 2, "disk full", /*completed=*/false, &why).ok());
  EXPECT_TRUE(p.aborting());
  EXPECT_EQ(why.message(), "trainer 2 failed, so the job stops: disk full");
  EXPECT_EQ(rpc::JobStoppedBy(why), 2);
  EXPECT_EQ(p.Refusal(), why);
  // A later ABORT (trainer 0 heard it and stopped) does not restate it; that
  // trainer counts as told and as having echoed.
  absl::Status later;
  absl::Status s = p.Abort(0, 2, "its Get failed", false, &later);
  EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
  EXPECT_NE(s.message().find("was already stopping: trainer 2 failed"), std::string::npos) << s;
  EXPECT_EQ(p.told(), std::set<int>{0});
  EXPECT_EQ(p.echoed(), std::set<int>{0});
}

TEST(AbortProtocolTest, AnAbortPassingOnAnotherTrainersFailureNamesThatTrainer) {
  AbortProtocol p(2);
  absl::Status why;
  ASSERT_TRUE(p.Abort(1, 0, "pserver b: trainer 0 failed, so the job stops: oom", false, &why).ok());
  EXPECT_EQ(why.message(), "the job stops, as trainer 1 heard: pserver b: trainer 0 failed, so the job stops: oom");
  EXPECT_EQ(rpc::JobStoppedBy(why), 0);
}

TEST(AbortProtocolTest, ACompletedTrainersAbortLeavesTheJobRunning) {
  AbortProtocol p(2);
  absl::Status why;
  absl::Status s = p.Abort(0, 0, "writing its results", /*completed=*/true, &why);
  EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
  EXPECT_NE(s.message().find("trainer 0 had completed; the job goes on"), std::string::npos) << s;
  EXPECT_FALSE(p.aborting());
  EXPECT_TRUE(p.Refusal().ok());
  ASSERT_TRUE(p.Abort(1, 1, "", false, &why).ok());
  EXPECT_EQ(why.message(), "trainer 1 failed, so the job stops: it gave no reason");
}

TEST(AbortProtocolTest, OnlyRefusalsToTrainersOfTheJobCountAsTold) {
  AbortProtocol p(3);
  p.NoteTold(1, absl::InternalError("before the job stopped"));  // not stopping yet: nothing
  absl::Status why;
  ASSERT_TRUE(p.Abort(0, 0, "x", false, &why).ok());
  p.NoteTold(1, absl::OkStatus());  // an answer that was not a refusal
  p.NoteTold(7, why);               // no such trainer
  p.NoteTold(-1, why);
  EXPECT_TRUE(p.told().empty());
  p.NoteTold(2, why);
  EXPECT_EQ(p.told(), std::set<int>{2});
}

// Trainer 0 failed, trainer 1 completed: Linger waits for trainer 2 alone,
// first to be told, then to echo.
TEST(AbortProtocolTest, LingerEndsOnceEveryLiveTrainerWasToldAndEchoed) {
  AbortProtocol p(3);
  absl::Status why;
  ASSERT_TRUE(p.Abort(0, 0, "x", false, &why).ok());
  std::thread trainer2([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    p.NoteTold(2, why);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    absl::Status ignored;
    EXPECT_TRUE(absl::IsAlreadyExists(p.Abort(2, 0, "heard it", false, &ignored)));
  });
  // Bounds far beyond what the test needs: returning at all shows Linger
  // ended on the echo.
  EXPECT_EQ(p.Linger({1}, absl::Minutes(10), absl::Minutes(10)), why);
  trainer2.join();
  EXPECT_EQ(p.echoed(), std::set<int>{2});
}

TEST(AbortProtocolTest, LingerIsBoundedAndStopEndsIt) {
  AbortProtocol p(2);
  absl::Status why;
  ASSERT_TRUE(p.Abort(0, 0, "x", false, &why).ok());
  // Trainer 1 is never told: the wait ends at its bound.
  EXPECT_EQ(p.Linger({}, absl::Milliseconds(10), absl::Minutes(10)), why);
  // Told, never echoing: the echo grace bounds the second wait.
  p.NoteTold(1, why);
  EXPECT_EQ(p.Linger({}, absl::Minutes(10), absl::Milliseconds(10)), why);
  // Neither, but Stop(): the wait ends.
  AbortProtocol q(2);
  ASSERT_TRUE(q.Abort(0, 0, "x", false, &why).ok());
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    q.Stop();
  });
  EXPECT_EQ(q.Linger({}, absl::Minutes(10), absl::Minutes(10)), why);
  stopper.join();
}

}  // namespace
}  // namespace oar
