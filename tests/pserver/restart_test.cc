// A pserver that crashes and restarts from its last checkpoint_notify
// checkpoint, in a 2 pservers x 2 trainers sync job on the in-process
// transport: the trainers ride out the outage (their calls fail
// UNAVAILABLE and are retried), the restored pserver makes each trainer
// resync — resending the step it has lost — and the job finishes. A restart
// right after the checkpoint ends with exactly the parameters of a run
// without it. The same for async (which rolls back to the checkpoint and
// goes on).
#include <cmath>
#include <cstring>
#include <filesystem>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/util/inproc_job.h"
#include "tests/util/oar_process.h"

namespace oar {
namespace {

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Not there yet (the checkpoint makes it); removed when the binary exits.
std::string FreshDir(const std::string& name) {
  const std::string dir = TempDir("restart_" + name);
  std::filesystem::remove_all(dir);
  return dir;
}

class PserverRestartTest : public ::testing::TestWithParam<int> {};

// Trainer `restarter` checkpoints after step 4 and crashes pserver 0 at once;
// the other trainer is wherever its thread has got to.
TEST_P(PserverRestartTest, ARestartRightAfterACheckpointLosesNothing) {
  const int restarter = GetParam();
  JobSpec clean_spec;
  const JobResult clean = RunJob(clean_spec);
  ASSERT_TRUE(clean.ok()) << clean.Errors();
  const std::string dir = FreshDir(std::to_string(restarter));
  JobSpec spec;
  absl::Status restart = absl::UnknownError("never restarted");
  spec.after_step = [&](int trainer, int step, JobControl& job) {
    if (trainer != restarter || step != 4) return;
    restart = job.Checkpoint(dir);
    EXPECT_TRUE(std::filesystem::exists(dir + "/pserver_0/__manifest__"));
    if (restart.ok()) restart = job.RestartPserver(0, dir);
  };
  const JobResult r = RunJob(spec);
  ASSERT_TRUE(restart.ok()) << restart;
  ASSERT_TRUE(r.ok()) << r.Errors();
  for (int t = 0; t < 2; ++t) {
    EXPECT_TRUE(SameBits(r.losses[t], clean.losses[t])) << "trainer " << t;
    for (const auto& p : JobParams()) EXPECT_TRUE(SameBits(r.final[t].at(p), clean.final[t].at(p))) << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Restarter, PserverRestartTest, ::testing::Values(0, 1));

// Later than the checkpoint: pserver 0 rolls back to step 5 while the job
// is at step 8; the job still finishes and trains on. The restart comes
// when both trainers have ended step 7 (pulled its parameters) and neither
// has begun step 8: trainer 0 waits for trainer 1 there, and trainer 1 for
// the restart. (A restart while one trainer is still pulling step 7 and
// the other has begun step 8 makes them resend different steps, which the
// restored pserver merges as one: see the closing notes of issue 50.)
JobResult RollBackAtStep8(bool sync, const std::string& dir) {
  std::filesystem::remove_all(dir);
  JobSpec spec;
  spec.sync = sync;
  absl::Status restart = absl::UnknownError("never restarted");
  absl::Notification trainer1_at_8, restarted;
  spec.after_step = [&](int trainer, int step, JobControl& job) {
    if (trainer == 1 && step == 7) {
      trainer1_at_8.Notify();
      EXPECT_TRUE(restarted.WaitForNotificationWithTimeout(absl::Seconds(60)));
    }
    if (trainer != 0) return;
    if (step == 4) EXPECT_TRUE(job.Checkpoint(dir).ok());
    if (step == 7) {
      EXPECT_TRUE(trainer1_at_8.WaitForNotificationWithTimeout(absl::Seconds(60)));
      restart = job.RestartPserver(0, dir);
      restarted.Notify();
    }
  };
  JobResult r = RunJob(spec);
  EXPECT_TRUE(restart.ok()) << restart;
  return r;
}

double Distance(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(d);
}

// Sync, checked by value: steps 0-8 are the clean run's bit for bit (step 8
// trains on what was pulled before the restart); from step 9 on pserver 0's
// half has lost the steps after the checkpoint, the same bits every run:
// both trainers hold the same parameters, which differ from the clean run's
// by less than what 10 steps moved them.
TEST(PserverRestartTest, ARestartAfterMoreStepsRollsBackByValue) {
  const JobResult clean = RunJob(JobSpec{});
  ASSERT_TRUE(clean.ok()) << clean.Errors();
  const JobResult r = RollBackAtStep8(true, FreshDir("late_sync"));
  ASSERT_TRUE(r.ok()) << r.Errors();
  const JobResult again = RollBackAtStep8(true, FreshDir("late_sync_again"));
  ASSERT_TRUE(again.ok()) << again.Errors();
  for (int t = 0; t < 2; ++t) {
    ASSERT_EQ(r.losses[t].size(), 10u);
    EXPECT_TRUE(SameBits({r.losses[t].begin(), r.losses[t].begin() + 9},
                         {clean.losses[t].begin(), clean.losses[t].begin() + 9}))
        << "trainer " << t << ": the steps before the restart changed";
    EXPECT_NE(r.losses[t][9], clean.losses[t][9]) << "trainer " << t << ": nothing was rolled back";
    EXPECT_LT(r.losses[t].back(), r.losses[t].front());
    EXPECT_TRUE(SameBits(r.losses[t], again.losses[t])) << "trainer " << t;
    for (const auto& p : JobParams()) {
      EXPECT_TRUE(SameBits(r.final[t].at(p), again.final[t].at(p))) << p;
      EXPECT_TRUE(SameBits(r.final[t].at(p), r.final[0].at(p))) << p << ": the trainers disagree";
    }
    const double lost = Distance(r.final[t].at("w1"), clean.final[t].at("w1")),
                 trained = Distance(clean.initial[t].at("w1"), clean.final[t].at("w1"));
    EXPECT_GT(lost, 0) << "pserver 0's block of w1 was not rolled back";
    EXPECT_LT(lost, 0.5 * trained) << "rolled back further than the checkpoint";
  }
}

// Async: the interleaving varies run to run (a loaded machine reorders it),
// so no run is the reference; the job finishes with finite losses.
TEST(PserverRestartTest, AnAsyncRestartAfterMoreStepsRollsBackAndFinishes) {
  const JobResult r = RollBackAtStep8(false, FreshDir("late_async"));
  ASSERT_TRUE(r.ok()) << r.Errors();
  EXPECT_EQ(r.losses[0].size(), 10u);
  for (float l : r.losses[0]) EXPECT_TRUE(std::isfinite(l)) << "async loss " << l;
}

}  // namespace
}  // namespace oar
